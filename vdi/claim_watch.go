package vdi

import (
	"context"
	"sync"
	"time"
)

// ChangeNotifier is a Leases store that reports every change of a claim
// as it happens, every replica's (the Kubernetes backend's Lease
// informer): a write, a release, an invitation revoked.
type ChangeNotifier interface {
	// OnChange calls f with the member of each claim created, written or
	// deleted, from then on.
	OnChange(f func(Ref))
}

// claimChanges hands out, per member, a channel closed at the next change
// of its claim that the Leases store reports. The zero value is ready.
type claimChanges struct {
	once sync.Once
	mu   sync.Mutex
	next map[Ref]chan struct{}
}

// ClaimChanged returns a channel closed at the next change of ref's claim
// made on any replica, so that a console on this one can check at once
// what it may still show (an invitation revoked, the desktop released).
// It is nil, and never ready, when the Leases store reports no changes
// (the local backend: one process, whose handlers act at once anyway).
func (s *Service) ClaimChanged(ref Ref) <-chan struct{} {
	n, ok := s.leases.(ChangeNotifier)
	if !ok {
		return nil
	}
	c := &s.changes
	c.once.Do(func() { n.OnChange(c.changed) })
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.next == nil {
		c.next = map[Ref]chan struct{}{}
	}
	ch := c.next[ref]
	if ch == nil {
		ch = make(chan struct{})
		c.next[ref] = ch
	}
	return ch
}

// changed wakes whoever waits for a change of ref's claim.
func (c *claimChanges) changed(ref Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.next[ref]; ch != nil {
		close(ch)
		delete(c.next, ref)
	}
}

// winSeenWait bounds how long a claim that lost a member waits for its
// portal's list to show the winner's claim (awaitWin).
const winSeenWait = 250 * time.Millisecond

// awaitWin waits a moment for this portal's list of pool's Leases to show
// ref's, which another claimant has just won: a list fed by a watch
// (ChangeNotifier) may lag that write, and the members it shows free
// meanwhile may have gone the same way, each a race lost in its turn. It
// reports whether the list shows it, and with it every claim written
// before it (a watch reports writes in order); false when the store
// reports no changes (its list is read at once), or after winSeenWait.
func (s *Service) awaitWin(ctx context.Context, ref Ref, pool string) bool {
	if _, ok := s.leases.(ChangeNotifier); !ok {
		return false
	}
	changed := s.ClaimChanged(ref) // before the look, so no change falls between
	leases, err := s.leases.List(ctx, ref.Namespace, pool)
	if err != nil {
		return false
	}
	for _, l := range leases {
		if l.Member == ref.Name {
			return true
		}
	}
	t := time.NewTimer(winSeenWait)
	defer t.Stop()
	select {
	case <-changed:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}
