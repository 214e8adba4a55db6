-- Console recordings: one file under the data dir's recordings/ per
-- recorded session, named by the session id. A row with no ended_at is a
-- recording in progress, or one a crash left open (closed on the next
-- start). Rows outlive the session history they came from.
CREATE TABLE recordings (
	id         TEXT PRIMARY KEY, -- the session id, and the file's name
	login      TEXT    NOT NULL,
	namespace  TEXT    NOT NULL,
	member     TEXT    NOT NULL,
	protocol   TEXT    NOT NULL,
	format     TEXT    NOT NULL,
	started_at INTEGER NOT NULL, -- unix nanoseconds
	ended_at   INTEGER,
	bytes      BIGINT  NOT NULL DEFAULT 0
);
CREATE INDEX recordings_started ON recordings (started_at);
