package store

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// holderRules is what a CheckedBy store checks in each of its writes.
type holderRules struct {
	holder string
	check  func(held []*vdi.Lease) error
}

var _ vdi.HolderChecks = (*Leases)(nil)

// CheckedBy implements vdi.HolderChecks on PostgreSQL: each write
// transaction first takes the holder's advisory lock
// (pg_advisory_xact_lock, let go when the transaction ends, by PostgreSQL
// itself when a portal dies), then reads the holder's Leases with a
// snapshot taken after the lock (READ COMMITTED), so it sees every write of
// the holder committed before; a claim is then one write and no lock row.
// SQLite's portals take their claim locks in a file beside the database
// (LockClaims), so there ok is false.
func (s *Leases) CheckedBy(holder string, check func(held []*vdi.Lease) error) (vdi.Leases, bool) {
	if s.db.db.locks != nil {
		return nil, false
	}
	return &Leases{db: s.db, rules: &holderRules{holder: holder, check: check}}, true
}

// holderLockClass is the first key of the holders' advisory locks; the
// two-key locks are apart from the one-key migrationLock.
const holderLockClass int32 = 0x63_76_64 // "cvd"

// checkRules runs the rules of a CheckedBy store in tx, which has written
// nothing yet: it waits for the holder's lock, then checks the holder's
// Leases. check's error is returned as it is.
func (s *Leases) checkRules(ctx context.Context, tx *txn) error {
	if s.rules == nil {
		return nil
	}
	h := fnv.New32a()
	h.Write([]byte(s.rules.holder))
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(?, ?)`, holderLockClass, int32(h.Sum32())); err != nil {
		return fmt.Errorf("store: lock the claims of %q: %w", s.rules.holder, err)
	}
	rows, err := tx.tx.QueryContext(ctx, tx.d.rebind(`SELECT `+leaseColumns+` FROM leases WHERE holder = ?`), s.rules.holder)
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
