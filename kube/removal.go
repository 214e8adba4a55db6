package kube

import (
	"context"
	"errors"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Before removing a member (a shrink, a pool's deletion) CT pools and VM
// pools (in a Cluster) claim it with the member's own Lease, as a user
// would, so that a claim made after the caller looked at the claims either
// wins (and the member stays) or loses (and the member is gone before
// anyone gets it). The Lease is deleted once the member is gone.

// RemovingHolder is the holder of the Lease on a member the portal is
// removing from its pool.
const RemovingHolder = "corral-vdi-portal (removing)"

// removingFor is how long such a Lease lasts should the portal stop
// halfway.
const removingFor = 10 * time.Minute

// errHeld: the member is claimed.
var errHeld = errors.New("kube: the member is claimed")

// takeFor claims member of pool namespace/pool for its removal: it creates
// the member's Lease, or takes over an expired one; errHeld when someone
// holds it.
func takeFor(ctx context.Context, leases vdi.Leases, namespace, pool, member string) (*vdi.Lease, error) {
	now := time.Now()
	want := &vdi.Lease{Namespace: namespace, Member: member, Pool: pool, Holder: RemovingHolder,
		AcquireTime: now, RenewTime: now, Duration: removingFor}
	l, err := leases.Create(ctx, want)
	if !errors.Is(err, vdi.ErrAlreadyExists) {
		return l, err
	}
	old, err := leases.Get(ctx, want.Ref())
	if errors.Is(err, vdi.ErrNotFound) {
		return nil, errHeld // released meanwhile, or not seen yet: leave it
	} else if err != nil {
		return nil, err
	}
	if !old.Expired(now) {
		return nil, errHeld
	}
	want.ResourceVersion = old.ResourceVersion
	l, err = leases.Update(ctx, want)
	if errors.Is(err, vdi.ErrConflict) {
		return nil, errHeld
	}
	return l, err
}

// releaseTaken deletes the Leases takeFor made.
func releaseTaken(ctx context.Context, leases vdi.Leases, taken []*vdi.Lease) error {
	var errs []error
	for _, l := range taken {
		if err := leases.Delete(ctx, l); err != nil && !errors.Is(err, vdi.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
