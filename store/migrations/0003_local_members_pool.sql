-- Members by pool, in the order pools list them: the dashboard and every
-- claim read one pool's members.
CREATE INDEX local_members_pool ON local_members (pool, created_at, name);
