-- What the replicas saw of each pool in 5-minute buckets (vdi.PoolSample),
-- for the dashboard's charts: bucket is the bucket's start in Unix
-- seconds; size, claimed and warm are the highest seen, free_low the
-- lowest; refused and the reclaims by rule are counts, each replica adding
-- its own. 0013 is the token scopes'.
CREATE TABLE pool_samples (
	namespace TEXT NOT NULL,
	pool TEXT NOT NULL,
	bucket BIGINT NOT NULL,
	size BIGINT NOT NULL,
	claimed BIGINT NOT NULL,
	free_low BIGINT NOT NULL,
	warm BIGINT NOT NULL,
	refused BIGINT NOT NULL DEFAULT 0,
	reclaim_disconnect BIGINT NOT NULL DEFAULT 0,
	reclaim_max_session BIGINT NOT NULL DEFAULT 0,
	reclaim_idle BIGINT NOT NULL DEFAULT 0,
	reclaim_expired BIGINT NOT NULL DEFAULT 0,
	PRIMARY KEY (namespace, pool, bucket)
);
CREATE INDEX pool_samples_bucket ON pool_samples (bucket);
