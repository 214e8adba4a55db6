-- Personal access tokens: an agent (or a script) acts as login with one,
-- limited to the pools listed. Only the token's SHA-256 is kept; the
-- token itself is shown once, when it is made. Deleting the row revokes it.
CREATE TABLE tokens (
	id           TEXT PRIMARY KEY,
	login        TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	pools        TEXT    NOT NULL, -- JSON array of "ns/pool" or "*"
	groups_json  TEXT    NOT NULL, -- the user's groups when it was made
	admin        INTEGER NOT NULL DEFAULT 0,
	hash         TEXT    NOT NULL UNIQUE, -- hex SHA-256 of the token
	created_by   TEXT    NOT NULL,
	created_at   INTEGER NOT NULL, -- unix nanoseconds
	expires_at   INTEGER NOT NULL,
	last_used_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX tokens_login ON tokens (login);
