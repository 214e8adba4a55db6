-- Members by pool, in the order pools list them: the dashboard and every
-- claim read one pool's members.
CREATE INDEX local_members_pool ON local_members (pool, created_at, name);

-- Claims by pool: every claim and the dashboard list one pool's Leases.
CREATE INDEX leases_pool ON leases (namespace, pool);
