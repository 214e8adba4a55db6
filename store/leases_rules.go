package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// holderRules is what a CheckedBy store checks in each of its writes.
type holderRules struct {
	holder string
	check  func(held []*vdi.Lease) error
}

var _ vdi.HolderChecks = (*Leases)(nil)

// CheckedBy implements vdi.HolderChecks on PostgreSQL: each write first
// takes the holder's advisory lock (pg_advisory_xact_lock for a write in
// a transaction, let go when it ends; pg_advisory_lock on CreateFirst's
// connection, let go after its one statement; PostgreSQL itself lets
// either go when a portal dies), then reads the holder's Leases with a
// snapshot taken after the lock (READ COMMITTED), so it sees every write
// of the holder committed before; a claim is then one write and no lock
// row. SQLite's portals take their claim locks in a file beside the
// database (LockClaims), so there ok is false.
func (s *Leases) CheckedBy(holder string, check func(held []*vdi.Lease) error) (vdi.Leases, bool) {
	if s.db.db.locks != nil {
		return nil, false
	}
	return &Leases{db: s.db, rules: &holderRules{holder: holder, check: check}}, true
}

// holderLockClass is the first key of the holders' advisory locks; the
// two-key locks are apart from the one-key migrationLock.
const holderLockClass int32 = 0x63_76_64 // "cvd"

// holderLock is the second key of holder's advisory lock.
func holderLock(holder string) int32 {
	h := fnv.New32a()
	h.Write([]byte(holder))
	return int32(h.Sum32())
}

// pgQuerier is a PostgreSQL transaction or connection (queries in its own
// placeholders, $1).
type pgQuerier interface {
	ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// checkRules runs the rules of a CheckedBy store in tx, which has written
// nothing yet: it waits for the holder's lock, then checks the holder's
// Leases. check's error is returned as it is.
func (s *Leases) checkRules(ctx context.Context, tx *txn) error {
	if s.rules == nil {
		return nil
	}
	if _, err := tx.tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, $2)`, holderLockClass, holderLock(s.rules.holder)); err != nil {
		return fmt.Errorf("store: lock the claims of %q: %w", s.rules.holder, err)
	}
	return s.checkHeld(ctx, tx.tx)
}

// lockRules takes the holder's advisory lock of a CheckedBy store on c,
// a connection, then checks the holder's Leases, and returns the
// function that lets the lock go. check's error is returned as it is,
// with the lock let go.
func (s *Leases) lockRules(ctx context.Context, c *sql.Conn) (unlock func(), err error) {
	if s.rules == nil {
		return func() {}, nil
	}
	key := holderLock(s.rules.holder)
	if _, err := c.ExecContext(ctx, `SELECT pg_advisory_lock($1, $2)`, holderLockClass, key); err != nil {
		// Perhaps taken after all (the context ended as it came): the
		// connection goes, and its locks with it.
		c.Raw(func(any) error { return driver.ErrBadConn })
		return nil, fmt.Errorf("store: lock the claims of %q: %w", s.rules.holder, err)
	}
	unlock = func() {
		// Even when the claim's request ended; else the connection goes,
		// and its locks with it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := c.ExecContext(ctx, `SELECT pg_advisory_unlock($1, $2)`, holderLockClass, key); err != nil {
			c.Raw(func(any) error { return driver.ErrBadConn })
		}
	}
	if err := s.checkHeld(ctx, c); err != nil {
		unlock()
		return nil, err
	}
	return unlock, nil
}

// checkHeld reads the holder's Leases through q and checks them.
func (s *Leases) checkHeld(ctx context.Context, q pgQuerier) error {
	rows, err := q.QueryContext(ctx, `SELECT `+leaseColumns+` FROM leases WHERE holder = $1`, s.rules.holder)
	if err != nil {
		return fmt.Errorf("store: read the leases of %q: %w", s.rules.holder, err)
	}
	defer rows.Close()
	var held []*vdi.Lease
	for rows.Next() {
		l, err := scanLease(rows)
		if err != nil {
			return fmt.Errorf("store: read the leases of %q: %w", s.rules.holder, err)
		}
		held = append(held, l)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: read the leases of %q: %w", s.rules.holder, err)
	}
	return s.rules.check(held)
}
