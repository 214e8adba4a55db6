-- Console recordings (see ../0006_recordings.sql).
CREATE TABLE recordings (
	id         TEXT PRIMARY KEY,
	login      TEXT   NOT NULL,
	namespace  TEXT   NOT NULL,
	member     TEXT   NOT NULL,
	protocol   TEXT   NOT NULL,
	format     TEXT   NOT NULL,
	started_at BIGINT NOT NULL,
	ended_at   BIGINT,
	bytes      BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX recordings_started ON recordings (started_at);
