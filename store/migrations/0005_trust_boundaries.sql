-- Retention prunes by count per actor (and per login for sessions): the
-- window query partitions by these.
CREATE INDEX audit_actor ON audit (actor, at);
CREATE INDEX sessions_login ON sessions (login, opened_at);

-- What retention removed and when, for the history page.
CREATE TABLE prunes (
	at       INTEGER NOT NULL,
	audit    INTEGER NOT NULL,
	sessions INTEGER NOT NULL
);

-- Sign-out and an admin's "end sessions": a cookie of login issued before
-- "before" (unix nanoseconds) is no longer a session.
CREATE TABLE session_revocations (
	login  TEXT PRIMARY KEY,
	before INTEGER NOT NULL
);
