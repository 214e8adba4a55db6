package leasetest

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// writeCount counts the writes a benchmark's claims ask of the store, and
// the races for a member they lost (a Create answered "already exists", a
// takeover answered "conflict"): writes a claim spent for nothing.
type writeCount struct {
	writes, lost atomic.Int64
}

// countedLeases is a Leases store whose writes are counted.
type countedLeases struct {
	vdi.Leases
	n *writeCount
}

// count wraps l so that n counts its writes, keeping the optional
// interfaces the claim path looks for (vdi.LeaseBatcher, vdi.ClaimLocks,
// vdi.HolderChecks; vdi.ChangeNotifier).
func count(l vdi.Leases, n *writeCount) vdi.Leases {
	c := countedLeases{l, n}
	if b, ok := l.(batchLocker); ok {
		return countedBatch{c, b}
	}
	if cn, ok := l.(vdi.ChangeNotifier); ok {
		return countedNotifier{c, cn}
	}
	return c
}

// countedNotifier is a countedLeases of a store that reports changes (the
// Kubernetes one), so that claims wait for a won member's Lease to show
// and for a user's claim lock to be let go as they do in a portal.
type countedNotifier struct {
	countedLeases
	n vdi.ChangeNotifier
}

func (c countedNotifier) OnChange(f func(vdi.Ref)) { c.n.OnChange(f) }

// wrote counts a write, and a lost race when err says the write lost a
// member (a claim lock is waited for, not lost).
func (c countedLeases) wrote(l *vdi.Lease, err error) {
	c.n.writes.Add(1)
	if l != nil && l.Pool != "claim.lock" && (errors.Is(err, vdi.ErrAlreadyExists) || errors.Is(err, vdi.ErrConflict)) {
		c.n.lost.Add(1)
	}
}

func (c countedLeases) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	out, err := c.Leases.Create(ctx, l)
	c.wrote(l, err)
	return out, err
}

func (c countedLeases) Update(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	out, err := c.Leases.Update(ctx, l)
	c.wrote(l, err)
	return out, err
}

func (c countedLeases) Delete(ctx context.Context, l *vdi.Lease) error {
	err := c.Leases.Delete(ctx, l)
	c.n.writes.Add(1)
	return err
}

// batchLocker is a store that batches creates, takes claim locks itself
// and may check the rules in its writes (the SQL stores).
type batchLocker interface {
	vdi.LeaseBatcher
	vdi.ClaimLocks
	vdi.HolderChecks
}

// countedBatch is a countedLeases of a batchLocker.
type countedBatch struct {
	countedLeases
	b batchLocker
}

func (c countedBatch) CreateFirst(ctx context.Context, wants []*vdi.Lease) (*vdi.Lease, error) {
	out, err := c.b.CreateFirst(ctx, wants)
	var first *vdi.Lease
	if len(wants) > 0 {
		first = wants[0]
	}
	c.wrote(first, err)
	return out, err
}

func (c countedBatch) LockClaims(ctx context.Context, key string) (func(), bool, error) {
	return c.b.LockClaims(ctx, key)
}

// CheckedBy counts the writes of the store that checks the rules.
func (c countedBatch) CheckedBy(holder string, check func([]*vdi.Lease) error) (vdi.Leases, bool) {
	l, ok := c.b.CheckedBy(holder, check)
	if !ok {
		return nil, false
	}
	return count(l, c.n), true
}
