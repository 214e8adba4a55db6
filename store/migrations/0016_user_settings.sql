-- Each user's console settings, kept by the portal so that they follow
-- the user to any browser and any replica (the console's Size choice:
-- handlers/settings.go). One row per login and setting; the value is
-- checked by the handler before it is kept.
CREATE TABLE user_settings (
	login      TEXT    NOT NULL,
	name       TEXT    NOT NULL,
	value      TEXT    NOT NULL,
	updated_at INTEGER NOT NULL, -- unix nanoseconds
	PRIMARY KEY (login, name)
);
