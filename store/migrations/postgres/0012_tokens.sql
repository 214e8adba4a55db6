-- Personal access tokens (see ../0012_tokens.sql).
CREATE TABLE tokens (
	id           TEXT PRIMARY KEY,
	login        TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	pools        TEXT    NOT NULL,
	groups_json  TEXT    NOT NULL,
	admin        INTEGER NOT NULL DEFAULT 0,
	hash         TEXT    NOT NULL UNIQUE,
	created_by   TEXT    NOT NULL,
	created_at   BIGINT  NOT NULL,
	expires_at   BIGINT  NOT NULL,
	last_used_at BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX tokens_login ON tokens (login);
