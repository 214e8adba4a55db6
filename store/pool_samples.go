package store

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// AddPoolSample merges s into its pool's bucket: size, claimed and warm
// by the highest, free by the lowest, and the counts added, so that
// replicas sampling the same pool neither overwrite nor double count each
// other (each counts only the refusals and reclaims it made).
func (db *DB) AddPoolSample(ctx context.Context, s vdi.PoolSample) error {
	g, l := db.db.d.greatest, db.db.d.least
	_, err := db.db.ExecContext(ctx, `INSERT INTO pool_samples (namespace, pool, bucket, size, claimed, free_low, warm, refused,
		reclaim_disconnect, reclaim_max_session, reclaim_idle, reclaim_expired) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (namespace, pool, bucket) DO UPDATE SET
		size = `+g+`(pool_samples.size, excluded.size), claimed = `+g+`(pool_samples.claimed, excluded.claimed),
		free_low = `+l+`(pool_samples.free_low, excluded.free_low), warm = `+g+`(pool_samples.warm, excluded.warm),
		refused = pool_samples.refused + excluded.refused,
		reclaim_disconnect = pool_samples.reclaim_disconnect + excluded.reclaim_disconnect,
		reclaim_max_session = pool_samples.reclaim_max_session + excluded.reclaim_max_session,
		reclaim_idle = pool_samples.reclaim_idle + excluded.reclaim_idle,
		reclaim_expired = pool_samples.reclaim_expired + excluded.reclaim_expired`,
		s.Namespace, s.Pool, s.Start.Unix(), s.Size, s.Claimed, s.Free, s.Warm, s.Refused,
		s.Reclaims[0], s.Reclaims[1], s.Reclaims[2], s.Reclaims[3])
	if err != nil {
		return fmt.Errorf("store: add sample of pool %s/%s: %w", s.Namespace, s.Pool, err)
	}
	return nil
}

// PoolSamples returns every pool's samples from since on, merged into
// buckets of step (a multiple of vdi.SampleBucket) the way AddPoolSample
// merges replicas, by pool and then time.
func (db *DB) PoolSamples(ctx context.Context, since time.Time, step time.Duration) ([]vdi.PoolSample, error) {
	sec := int64(step / time.Second)
	if sec <= 0 {
		return nil, fmt.Errorf("store: pool samples in steps of %s: want at least a second", step)
	}
	rows, err := db.db.QueryContext(ctx, `SELECT namespace, pool, (bucket / ?) * ? AS b, MAX(size), MAX(claimed), MIN(free_low), MAX(warm),
		CAST(SUM(refused) AS BIGINT), CAST(SUM(reclaim_disconnect) AS BIGINT), CAST(SUM(reclaim_max_session) AS BIGINT),
		CAST(SUM(reclaim_idle) AS BIGINT), CAST(SUM(reclaim_expired) AS BIGINT)
		FROM pool_samples WHERE bucket >= ? GROUP BY namespace, pool, b ORDER BY namespace, pool, b`, sec, sec, since.Unix())
	if err != nil {
		return nil, fmt.Errorf("store: pool samples: %w", err)
	}
	defer rows.Close()
	var out []vdi.PoolSample
	for rows.Next() {
		var s vdi.PoolSample
		var start int64
		if err := rows.Scan(&s.Namespace, &s.Pool, &start, &s.Size, &s.Claimed, &s.Free, &s.Warm, &s.Refused,
			&s.Reclaims[0], &s.Reclaims[1], &s.Reclaims[2], &s.Reclaims[3]); err != nil {
			return nil, fmt.Errorf("store: pool samples: %w", err)
		}
		s.Start = time.Unix(start, 0)
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: pool samples: %w", err)
	}
	return out, nil
}

// prunePoolSamples removes the samples of buckets that began more than
// r.MaxAge ago, and beyond each pool's newest r.MaxRows buckets.
func (db *DB) prunePoolSamples(ctx context.Context, r Retention) error {
	if r.MaxAge > 0 {
		if _, err := db.exec(ctx, `DELETE FROM pool_samples WHERE bucket < ?`, db.Now().Add(-r.MaxAge).Unix()); err != nil {
			return fmt.Errorf("store: prune pool samples by age: %w", err)
		}
	}
	if r.MaxRows > 0 {
		rowid := db.db.d.rowid
		if _, err := db.exec(ctx, `DELETE FROM pool_samples WHERE `+rowid+` IN (SELECT r FROM (SELECT `+rowid+` AS r, ROW_NUMBER() OVER (PARTITION BY namespace, pool
			ORDER BY bucket DESC) AS n FROM pool_samples) AS ranked WHERE n > ?)`, r.MaxRows); err != nil {
			return fmt.Errorf("store: prune pool samples by size: %w", err)
		}
	}
	return nil
}
