package leasetest

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// LockDeleteAwaits is a Leases store with claim-lock Leases, as on
// Kubernetes, whose claim-lock deletes say when they start (Started is
// closed) and then wait until the test closes Read (its client has the
// whole answer) or the delete's own deadline passes, and send which came
// first on Unlocked (true: the client had the answer first). One claim
// lock's delete at most: a test makes one per claim it answers.
type LockDeleteAwaits struct {
	vdi.Leases
	Started  chan struct{}
	Read     chan struct{}
	Unlocked chan bool
}

// NewLockDeleteAwaits returns leases with its claim-lock deletes held as
// LockDeleteAwaits says.
func NewLockDeleteAwaits(leases vdi.Leases) LockDeleteAwaits {
	return LockDeleteAwaits{Leases: leases, Started: make(chan struct{}), Read: make(chan struct{}), Unlocked: make(chan bool, 1)}
}

// Delete deletes l, a claim lock once the client has the answer or the
// delete's deadline has passed.
func (s LockDeleteAwaits) Delete(ctx context.Context, l *vdi.Lease) error {
	if l.Pool == "claim.lock" {
		close(s.Started)
		select {
		case <-s.Read:
			s.Unlocked <- true
		case <-ctx.Done():
			s.Unlocked <- false
		}
	}
	return s.Leases.Delete(context.WithoutCancel(ctx), l)
}
