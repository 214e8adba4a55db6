-- A key the writer picks for an audit row, so that a write retried after a
-- connection broke mid-way (it may have landed) is written once. Rows
-- written directly have none.
ALTER TABLE audit ADD COLUMN write_key TEXT;
CREATE UNIQUE INDEX audit_write_key ON audit (write_key);
