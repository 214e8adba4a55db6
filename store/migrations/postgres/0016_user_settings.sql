-- Each user's console settings (see ../0016_user_settings.sql).
CREATE TABLE user_settings (
	login      TEXT   NOT NULL,
	name       TEXT   NOT NULL,
	value      TEXT   NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (login, name)
);
