-- A pool's Leases by resource version: the portal's cache of a pool's
-- Leases reads only what changed since it last looked (store/leases_cache.go).
CREATE INDEX leases_pool_version ON leases (namespace, pool, resource_version);
