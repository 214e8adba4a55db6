package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Every write of a Lease takes lease_seq's one row lock for its resource
// version and keeps it until it commits, so writers on every pool queue
// behind whoever holds it: how long it is held sets the claims a second
// of the whole database. A claim storm on PostgreSQL, profiled (samples
// of pg_stat_activity), had nearly every backend waiting for that lock,
// while its holder sat idle in its transaction between round trips: an
// insert for each member other claimants had taken, then the commit.
// So CreateFirst on PostgreSQL takes the holder's rules' lock on its
// connection, not in a transaction, and writes in one statement on its
// own (createFirstPostgres), which holds lease_seq only while it runs.

// createFirstPostgres inserts, with the next lease_seq number, the first
// of the wants (given as parallel arrays, in order) whose member has no
// Lease in the statement's snapshot. Its one row says whether there was
// such a want (free, 0 or 1) and which member it took (NULL when another
// claimant's insert of that member, committed while this statement
// waited for lease_seq, came first: run it again, with a newer snapshot).
// With nothing free it leaves lease_seq alone.
const createFirstPostgres = `WITH free AS (
	SELECT w.* FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::bigint[], $8::text[])
		WITH ORDINALITY AS w(namespace, member, pool, holder, acquire_time, renew_time, duration_seconds, annotations, ord)
	WHERE NOT EXISTS (SELECT 1 FROM leases l WHERE l.namespace = w.namespace AND l.member = w.member)
	ORDER BY w.ord
	LIMIT 1
), seq AS (
	UPDATE lease_seq SET n = n + 1 WHERE EXISTS (SELECT 1 FROM free) RETURNING n
), took AS (
	INSERT INTO leases (` + leaseColumns + `)
	SELECT f.namespace, f.member, f.pool, f.holder, f.acquire_time, f.renew_time, f.duration_seconds, seq.n, f.annotations
	FROM free f, seq
	ON CONFLICT DO NOTHING
	RETURNING namespace, member, resource_version
)
SELECT (SELECT count(*) FROM free), took.namespace, took.member, took.resource_version
FROM (SELECT 1) one LEFT JOIN took ON true`

// createFirstOnPostgres is CreateFirst on PostgreSQL: the rules under the
// holder's lock, then createFirstPostgres until it takes a member or
// finds none free. Each time it finds its choice taken, the next one's
// snapshot shows that Lease, so it runs len(wants) times at most.
func (s *Leases) createFirstOnPostgres(ctx context.Context, wants []*vdi.Lease, anns map[string]string) (*vdi.Lease, error) {
	n := len(wants)
	namespaces, members, pools, holders := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	acquires, renews, durations, annotations := make([]int64, n), make([]int64, n), make([]int64, n), make([]string, n)
	for i, l := range wants {
		namespaces[i], members[i], pools[i], holders[i] = l.Namespace, l.Member, l.Pool, l.Holder
		acquires[i], renews[i], durations[i] = nanos(l.AcquireTime), nanos(l.RenewTime), int64(l.Duration/time.Second)
		annotations[i] = anns[l.Member]
	}
	c, err := s.db.db.db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", wants[0].Ref(), err)
	}
	defer c.Close()
	unlock, err := s.lockRules(ctx, c)
	if err != nil {
		return nil, err
	}
	defer unlock()
	for range n {
		var free int
		var namespace, member sql.NullString
		var rv sql.NullInt64
		if err := c.QueryRowContext(ctx, createFirstPostgres, namespaces, members, pools, holders, acquires, renews, durations, annotations).
			Scan(&free, &namespace, &member, &rv); err != nil {
			return nil, fmt.Errorf("store: write lease %s and %d more: %w", wants[0].Ref(), n-1, err)
		}
		if free == 0 {
			break
		}
		if !member.Valid {
			continue // taken while it waited for lease_seq
		}
		for _, l := range wants {
			if l.Namespace == namespace.String && l.Member == member.String {
				out := *l
				out.ResourceVersion = strconv.FormatInt(rv.Int64, 10)
				return &out, nil
			}
		}
	}
	return nil, fmt.Errorf("store: write lease %s and %d more: %w", wants[0].Ref(), n-1, vdi.ErrAlreadyExists)
}
