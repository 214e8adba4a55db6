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
type Leases struct{ db *DB }

var _ vdi.Leases = (*Leases)(nil)

const leaseColumns = `namespace, member, pool, holder, acquire_time, renew_time, duration_seconds, resource_version, annotations`

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
	rows, err := s.db.db.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases
		WHERE (? = '' OR namespace = ?) AND (? = '' OR pool = ?) ORDER BY namespace, member`,
		namespace, namespace, pool, pool)
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
	return s.write(ctx, l, func(tx *txn, rv int64, ann string) (sql.Result, error) {
		return tx.ExecContext(ctx, `INSERT INTO leases (`+leaseColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			l.Namespace, l.Member, l.Pool, l.Holder, nanos(l.AcquireTime), nanos(l.RenewTime),
			int64(l.Duration/time.Second), rv, ann)
	}, vdi.ErrAlreadyExists)
}

// Update replaces a Lease whose ResourceVersion is current; vdi.ErrConflict
// when it is stale or the Lease is gone.
func (s *Leases) Update(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	old, err := strconv.ParseInt(l.ResourceVersion, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("store: update lease %s: bad resource version %q: %w", l.Ref(), l.ResourceVersion, vdi.ErrConflict)
	}
	return s.write(ctx, l, func(tx *txn, rv int64, ann string) (sql.Result, error) {
		return tx.ExecContext(ctx, `UPDATE leases SET pool = ?, holder = ?, acquire_time = ?, renew_time = ?,
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
// transaction; no row affected means lost, reported as lostErr.
func (s *Leases) write(ctx context.Context, l *vdi.Lease, exec func(*txn, int64, string) (sql.Result, error), lostErr error) (*vdi.Lease, error) {
	ann, err := json.Marshal(l.Annotations)
	if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	tx, err := s.db.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("store: write lease %s: %w", l.Ref(), err)
	}
	defer tx.Rollback()
	var rv int64
	if err := tx.QueryRowContext(ctx, `UPDATE lease_seq SET n = n + 1 RETURNING n`).Scan(&rv); err != nil {
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
