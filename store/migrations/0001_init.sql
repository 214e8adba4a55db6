-- Claims in local mode, shaped like coordination.k8s.io/v1 Leases.
CREATE TABLE leases (
	namespace        TEXT    NOT NULL,
	member           TEXT    NOT NULL,
	pool             TEXT    NOT NULL,
	holder           TEXT    NOT NULL,
	acquire_time     INTEGER NOT NULL, -- unix nanoseconds
	renew_time       INTEGER NOT NULL,
	duration_seconds INTEGER NOT NULL,
	resource_version INTEGER NOT NULL,
	annotations      TEXT    NOT NULL DEFAULT '{}',
	PRIMARY KEY (namespace, member)
);

-- Pools of the local backend.
CREATE TABLE local_pools (
	name       TEXT PRIMARY KEY,
	kind       TEXT    NOT NULL,
	mode       TEXT    NOT NULL,
	source     TEXT    NOT NULL,
	size       INTEGER NOT NULL,
	policy     TEXT    NOT NULL DEFAULT '{}',
	created_at INTEGER NOT NULL
);

-- Members of local pools; the processes themselves are found by the backend.
CREATE TABLE local_members (
	name       TEXT PRIMARY KEY,
	pool       TEXT    NOT NULL REFERENCES local_pools(name) ON DELETE CASCADE,
	created_at INTEGER NOT NULL
);

-- Console sessions: history, a cache that may be lost without harm.
CREATE TABLE sessions (
	id           TEXT PRIMARY KEY,
	login        TEXT    NOT NULL,
	namespace    TEXT    NOT NULL,
	member       TEXT    NOT NULL,
	protocol     TEXT    NOT NULL,
	path         TEXT    NOT NULL,
	opened_at    INTEGER NOT NULL,
	closed_at    INTEGER,
	bytes_in     INTEGER NOT NULL DEFAULT 0,
	bytes_out    INTEGER NOT NULL DEFAULT 0,
	close_reason TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX sessions_member ON sessions (namespace, member, opened_at);

-- Audit log of claims, releases and admin actions.
CREATE TABLE audit (
	id        INTEGER PRIMARY KEY AUTOINCREMENT,
	at        INTEGER NOT NULL,
	actor     TEXT    NOT NULL,
	action    TEXT    NOT NULL,
	namespace TEXT    NOT NULL DEFAULT '',
	target    TEXT    NOT NULL DEFAULT '',
	detail    TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX audit_at ON audit (at);

-- One counter for lease resource versions, so a deleted and re-created Lease
-- never repeats a version a stale writer may still hold.
CREATE TABLE lease_seq (n INTEGER NOT NULL);
INSERT INTO lease_seq (n) VALUES (0);
