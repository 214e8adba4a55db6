package vdi

import (
	"context"
	"crypto/rand"
	"errors"
	mrand "math/rand/v2"
	"time"
)

// A user's claims are taken one at a time across every portal replica, so
// that the one-desktop-per-pool rule and the quotas, which read the Leases,
// hold under racing claims: before it claims, a portal takes the user's
// claim lock, itself a Lease in the lock namespace (the Lease store is the
// one thing every replica shares), and deletes it when done (after the
// answer, where the claim's caller asked for that: WithAnswerFirst). The
// lock's pool label is claimLockPool, which no pool can be named (pool
// names are DNS labels), so no pool lists it. A portal that dies holding the lock
// holds it for claimLockDuration at most; a claim that holds it ends its
// store requests claimLockGuard before then (lockClaims's until), so that a claim
// slowed past its lock (an API server that keeps refusing) fails rather
// than write beside the next claim of its user that takes the lock over.
const (
	claimLockPool     = "claim.lock"
	claimLockPrefix   = "claimlock-"
	claimLockDuration = 15 * time.Second
	claimLockGuard    = 3 * time.Second
	claimLockWait     = 20 * time.Second
)

// ClaimLocks is implemented by a Leases store that can take users' claim
// locks itself, more cheaply than with a lock Lease (two writes a claim),
// e.g. with file locks when every portal shares one database file on one
// machine. The lock must hold across every portal using the store.
type ClaimLocks interface {
	// LockClaims takes the lock named key, waiting while another holds it
	// until ctx ends, and returns the function that lets it go. ok is
	// false when this store cannot, and the caller uses a lock Lease.
	LockClaims(ctx context.Context, key string) (unlock func(), ok bool, err error)
}

// instanceID names this portal process as a lock holder.
var instanceID = "portal-" + rand.Text()[:16]

// claimLockRef is the lock of login in namespace ns.
func claimLockRef(ns, login string) Ref {
	return Ref{Namespace: ns, Name: claimLockPrefix + HolderLabel(login)}
}

// lockClaims takes login's claim lock (in the lock namespace, else in
// namespace) and returns the function that lets it go, the lock Lease's
// resourceVersion ("" for a store's own lock: the claim's reads must show
// every write before it, WithReadAfter) and the time by which the claim
// must be done with the store (zero for a store's own lock, which holds
// until let go). It waits for another claim of the same user to finish,
// and takes over a lock left by a portal that died. Her claims on this
// portal take turns first (claim_lock_turns.go), and one waiting for the
// lock Lease tries again when a change of it is reported, else polls.
func (s *Service) lockClaims(ctx context.Context, namespace, login string) (unlock func(), rv string, until time.Time, err error) {
	if s.lockNS != "" {
		namespace = s.lockNS
	}
	ref := claimLockRef(namespace, login)
	ctx, cancel := context.WithTimeout(ctx, claimLockWait)
	defer cancel()
	if cl, ok := s.leases.(ClaimLocks); ok {
		unlock, ok, err := cl.LockClaims(ctx, ref.String())
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, "", time.Time{}, Errorf(EUnavailable, "Wait for it to finish, then try again.",
				"Another claim of yours is still in progress.")
		case err != nil:
			return nil, "", time.Time{}, unavailable(err)
		case ok:
			return unlock, "", time.Time{}, nil
		}
	}
	pass, err := s.turns.take(ctx, ref)
	if err != nil {
		return nil, "", time.Time{}, Errorf(EUnavailable, "Wait for it to finish, then try again.",
			"Another claim of yours is still in progress.")
	}
	backoff := 2 * time.Millisecond
	for {
		// The lock runs out claimLockDuration after now by every
		// replica's clock; started is now by this process's own.
		now, started := s.now(), time.Now()
		want := &Lease{Namespace: ref.Namespace, Member: ref.Name, Pool: claimLockPool, Holder: instanceID,
			AcquireTime: now, RenewTime: now, Duration: claimLockDuration}
		l, err := s.leases.Create(ctx, want)
		if errors.Is(err, ErrAlreadyExists) {
			l, err = s.takeStaleLock(ctx, ref, want)
		}
		if err == nil && l != nil {
			return func() {
				defer pass()
				// Let go even when the claim's request was cancelled.
				dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := s.leases.Delete(dctx, l); err != nil && !errors.Is(err, ErrNotFound) {
					s.log.Warn("claim lock not let go; it runs out by itself", "user", login, "in", claimLockDuration, "err", err)
				}
			}, l.ResourceVersion, started.Add(claimLockDuration - claimLockGuard), nil
		}
		if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrAlreadyExists) {
			pass()
			return nil, "", time.Time{}, unavailable(err)
		}
		// A change of the lock on any replica (its let-go) wakes this
		// claim at once where the store reports changes; the poll is
		// for a change this replica does not see.
		letGo := s.ClaimChanged(ref)
		select {
		case <-ctx.Done():
			pass()
			return nil, "", time.Time{}, Errorf(EUnavailable, "Wait for it to finish, then try again.",
				"Another claim of yours is still in progress.")
		case <-letGo:
		case <-time.After(backoff/2 + time.Duration(mrand.Int64N(int64(backoff)))):
		}
		backoff = min(backoff*2, 100*time.Millisecond)
	}
}

// takeStaleLock takes over ref when its holder let it run out; a nil Lease
// and nil error mean someone holds it.
func (s *Service) takeStaleLock(ctx context.Context, ref Ref, want *Lease) (*Lease, error) {
	cur, err := s.leases.Get(ctx, ref)
	if err != nil {
		return nil, err // ErrNotFound: let go meanwhile; try again
	}
	if !cur.Expired(s.now()) {
		return nil, nil
	}
	want.ResourceVersion = cur.ResourceVersion
	return s.leases.Update(ctx, want)
}
