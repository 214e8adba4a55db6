package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Leases returns the local-mode claim store backed by db.
func (db *DB) Leases() *Leases { return &Leases{db: db} }

// Leases keeps vdi.Lease values in SQLite with the same compare-and-swap
// rules as coordination.k8s.io/v1 Leases.
type Leases struct {
	db *DB
	// rules, when set, are checked in each write (see CheckedBy).
	rules *holderRules
}

var _ vdi.Leases = (*Leases)(nil)

const leaseColumns = `namespace, member, pool, holder, acquire_time, renew_time, duration_seconds, resource_version, annotations`

var _ vdi.ClaimLocks = (*Leases)(nil)

// LockClaims implements vdi.ClaimLocks for SQLite, whose portals share the
// database file on one machine: a lock in the file beside it (see
// sqlite_locks.go). PostgreSQL's portals may be on several machines, so
// there it reports ok false.
func (s *Leases) LockClaims(ctx context.Context, key string) (unlock func(), ok bool, err error) {
	if s.db.db.locks == nil {
		return nil, false, nil
	}
	unlock, err = s.db.db.locks.lockUser(ctx, key)
	if err != nil {
		return nil, false, fmt.Errorf("store: claim lock: %w", err)
	}
	return unlock, true, nil
}

// Get returns the Lease of ref's member, or vdi.ErrNotFound.
func (s *Leases) Get(ctx context.Context, ref vdi.Ref) (*vdi.Lease, error) {
	row := s.db.db.QueryRowContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE namespace = ? AND member = ?`, ref.Namespace, ref.Name)
	l, err := scanLease(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: get lease %s: %w", ref, vdi.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("store: get lease %s: %w", ref, err)
	}
	return l, nil
}

// List returns the Leases in namespace, of pool when pool is not empty.
func (s *Leases) List(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	if namespace != "" && pool != "" && s.db.db.locks != nil {
		return s.cachedList(ctx, namespace, pool)
	}
	// One query per filter, not "(? = '' OR pool = ?)": that form keeps the
	// database from using the leases_pool index and reads every Lease of
	// every pool, which a claim storm pays for on each of its claims.
	q, args := `SELECT `+leaseColumns+` FROM leases`, []any{}
	switch {
	case namespace != "" && pool != "":
		q, args = q+` WHERE namespace = ? AND pool = ?`, []any{namespace, pool}
	case namespace != "":
		q, args = q+` WHERE namespace = ?`, []any{namespace}
	case pool != "":
		q, args = q+` WHERE pool = ?`, []any{pool}
	}
	rows, err := s.db.db.queryHot(ctx, q+` ORDER BY namespace, member`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list leases: %w", err)
	}
	defer rows.Close()
	var out []*vdi.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list leases: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Create stores a new Lease; vdi.ErrAlreadyExists when the member has one.
func (s *Leases) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	// A claimant that lost the race for this member learns it from a read:
	// at once when the Lease is there already, else when its turn to write
	// comes; the insert still decides (first writer wins).
	lost := func() bool { return s.exists(ctx, l.Ref()) }
	if lost() {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), vdi.ErrAlreadyExists)
	}
	return s.write(ctx, l, lost, func(tx *txn, rv int64, ann string) (sql.Result, error) {
		return tx.execHot(ctx, `INSERT INTO leases (`+leaseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			l.Namespace, l.Member, l.Pool, l.Holder, nanos(l.AcquireTime), nanos(l.RenewTime),
			int64(l.Duration/time.Second), rv, ann)
	}, vdi.ErrAlreadyExists)
}

var _ vdi.LeaseBatcher = (*Leases)(nil)

// CreateFirst implements vdi.LeaseBatcher: in one transaction, it inserts
// the first of wants whose member has no Lease. A claimant that lost its
// first choice to another gets its next one in the same turn of the write
// lock, rather than queueing again behind every other claimant. On
// PostgreSQL that is one statement (leases_postgres.go).
func (s *Leases) CreateFirst(ctx context.Context, wants []*vdi.Lease) (*vdi.Lease, error) {
	if len(wants) == 0 {
		return nil, fmt.Errorf("store: create lease: nothing to create: %w", vdi.ErrAlreadyExists)
	}
	anns := make(map[string]string, len(wants))
	for _, l := range wants {
		ann, err := json.Marshal(l.Annotations)
		if err != nil {
			return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
		}
		anns[l.Member] = string(ann)
	}
	if s.db.db.d.name == postgresDialect.name {
		return s.createFirstOnPostgres(ctx, wants, anns)
	}
	// Once its turn has come, it skips the members whose Leases it knows
	// of (the pool's cache, brought up to date), so it inserts once; the
	// insert still decides.
	untaken := wants
	allTaken := func() bool {
		untaken = s.untaken(ctx, wants)
		return len(untaken) == 0
	}
	tx, err := s.db.db.beginUnless(ctx, nil, allTaken)
	if errors.Is(err, errLost) {
		return nil, fmt.Errorf("store: write lease %s and %d more: %w", wants[0].Ref(), len(wants)-1, vdi.ErrAlreadyExists)
	} else if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", wants[0].Ref(), err)
	}
	defer tx.Rollback()
	if err := s.checkRules(ctx, tx); err != nil {
		return nil, err
	}
	var rv int64
	if err := tx.queryRowHot(ctx, `UPDATE lease_seq SET n = n + 1 RETURNING n`).Scan(&rv); err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", wants[0].Ref(), err)
	}
	for _, l := range untaken {
		res, err := tx.execHot(ctx, `INSERT INTO leases (`+leaseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			l.Namespace, l.Member, l.Pool, l.Holder, nanos(l.AcquireTime), nanos(l.RenewTime),
			int64(l.Duration/time.Second), rv, anns[l.Member])
		if err != nil {
			return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			continue // someone else's
		}
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
		}
		out := *l
		out.ResourceVersion = strconv.FormatInt(rv, 10)
		return &out, nil
	}
	return nil, fmt.Errorf("store: write lease %s and %d more: %w", wants[0].Ref(), len(wants)-1, vdi.ErrAlreadyExists)
}

// exists reports whether ref's member has a Lease; false when unsure.
func (s *Leases) exists(ctx context.Context, ref vdi.Ref) bool {
	rows, err := s.db.db.queryHot(ctx, `SELECT 1 FROM leases WHERE namespace = ? AND member = ?`, ref.Namespace, ref.Name)
	if err != nil {
		return false
	}
	defer rows.Close()
	return rows.Next()
}

// Update replaces a Lease whose ResourceVersion is current; vdi.ErrConflict
// when it is stale or the Lease is gone.
func (s *Leases) Update(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	old, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("store: update lease %s: bad resource version %q: %w", l.Ref(), l.ResourceVersion, vdi.ErrConflict)
	}
	return s.write(ctx, l, nil, func(tx *txn, rv int64, ann string) (sql.Result, error) {
		return tx.execHot(ctx, `UPDATE leases SET pool = ?, holder = ?, acquire_time = ?, renew_time = ?,
			duration_seconds = ?, resource_version = ?, annotations = ?
			WHERE namespace = ? AND member = ? AND resource_version = ?`,
			l.Pool, l.Holder, nanos(l.AcquireTime), nanos(l.RenewTime), int64(l.Duration/time.Second), rv, ann,
			l.Namespace, l.Member, old)
	}, vdi.ErrConflict)
}

// Delete removes a Lease whose ResourceVersion is current; vdi.ErrConflict
// when it is stale, vdi.ErrNotFound when it is gone.
func (s *Leases) Delete(ctx context.Context, l *vdi.Lease) error {
	res, err := s.db.db.ExecContext(ctx, `DELETE FROM leases WHERE namespace = ? AND member = ? AND resource_version = ?`,
		l.Namespace, l.Member, l.ResourceVersion)
	if err != nil {
		return fmt.Errorf("store: delete lease %s: %w", l.Ref(), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		if _, err := s.Get(ctx, l.Ref()); errors.Is(err, vdi.ErrNotFound) {
			return fmt.Errorf("store: delete lease %s: %w", l.Ref(), vdi.ErrNotFound)
		}
		return fmt.Errorf("store: delete lease %s: %w", l.Ref(), vdi.ErrConflict)
	}
	return nil
}

// write runs one insert or update with a fresh resource version inside a
// transaction, after the rules (see CheckedBy); no row affected means
// lost, reported as lostErr, and so does lost (when set) reporting true
// before the transaction begins.
func (s *Leases) write(ctx context.Context, l *vdi.Lease, lost func() bool, exec func(*txn, int64, string) (sql.Result, error), lostErr error) (*vdi.Lease, error) {
	ann, err := json.Marshal(l.Annotations)
	if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	tx, err := s.db.db.beginUnless(ctx, nil, lost)
	if errors.Is(err, errLost) {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), lostErr)
	} else if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	defer tx.Rollback()
	if err := s.checkRules(ctx, tx); err != nil {
		return nil, err
	}
	var rv int64
	if err := tx.queryRowHot(ctx, `UPDATE lease_seq SET n = n + 1 RETURNING n`).Scan(&rv); err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	res, err := exec(tx, rv, string(ann))
	if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), lostErr)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	out := *l
	out.ResourceVersion = strconv.FormatInt(rv, 10)
	return &out, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanLease(row scanner) (*vdi.Lease, error) {
	var l vdi.Lease
	var acquire, renew, dur, rv int64
	var ann string
	if err := row.Scan(&l.Namespace, &l.Member, &l.Pool, &l.Holder, &acquire, &renew, &dur, &rv, &ann); err != nil {
		return nil, err
	}
	l.AcquireTime, l.RenewTime = time.Unix(0, acquire), time.Unix(0, renew)
	l.Duration = time.Duration(dur) * time.Second
	l.ResourceVersion = strconv.FormatInt(rv, 10)
	if ann == "null" || ann == "{}" { // most Leases: spare the decoder
		return &l, nil
	}
	if err := json.Unmarshal([]byte(ann), &l.Annotations); err != nil {
		return nil, fmt.Errorf("annotations: %w", err)
	}
	return &l, nil
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}
