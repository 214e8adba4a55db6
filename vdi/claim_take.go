package vdi

import (
	"context"
	"errors"
	"time"
)

// Every write that gives a user a desktop (a claim, on the claim routes,
// the kiosk's and the agent's; an admin's assignment) is a take: the
// part of it that reads her rules and writes the member's Lease. It runs
// where her rules are kept: under her claim lock, in a store that checks
// them in its write, or, with claims by shard (claim_shards.go), on the
// replica that holds her shard, to which any other replica forwards it.

// TakeRequest is a take as it is forwarded: whom for, from which pool,
// and for an assignment which member and by whom. The replica that
// forwards it has checked that the user may have it (the pool's access,
// a token's scope, the admin's rights).
type TakeRequest struct {
	Login     string `json:"login"`
	Namespace string `json:"namespace"`
	Pool      string `json:"pool"`
	// Member is the member an admin assigns ("" for a claim).
	Member string `json:"member,omitempty"`
}

// TakeAnswer is a take's outcome: the Lease the user holds, and whether
// the take won it now (else she held it already).
type TakeAnswer struct {
	Lease *Lease `json:"lease"`
	Won   bool   `json:"won"`
}

// ErrNotHolder is a forwarded take's answer from a replica that does not
// hold the user's shard (any more): the sender looks the holder up again.
var ErrNotHolder = errors.New("vdi: this replica does not hold the claim's shard")

// TakeForwarded runs a take another replica forwarded here (signed with
// the peer secret, which the caller checked): under this replica's hold of
// the user's shard, never forwarded again; ErrNotHolder without it.
func (s *Service) TakeForwarded(ctx context.Context, req TakeRequest) (_ TakeAnswer, err error) {
	if s.shards == nil || req.Login == "" {
		return TakeAnswer{}, ErrNotHolder
	}
	ctx, trace := withClaimTrace(ctx)
	defer func() { s.logTrace(trace, "forwarded claim", req.Login, err) }()
	p, err := s.backend.Pool(ctx, req.Namespace, req.Pool)
	if err != nil {
		return TakeAnswer{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.claimWait)
	defer cancel()
	rctx, leases, done, ok, err := s.shards.enter(ctx, req.Login)
	step(ctx, enterStep(ok))
	if err != nil {
		return TakeAnswer{}, err
	} else if !ok {
		return TakeAnswer{}, ErrNotHolder
	}
	defer done()
	return s.takeIn(rctx, leases, p, req)
}

// route runs req's take where its user's rules are kept (see above) and
// returns its answer. p is req's pool.
func (s *Service) route(ctx context.Context, p Pool, req TakeRequest) (TakeAnswer, error) {
	if s.shards == nil {
		rctx, leases, done, err := s.ruled(ctx, req.Login, p, req.Member == "")
		if err != nil {
			return TakeAnswer{}, err
		}
		// The user's claim lock is let go once the claim is answered,
		// where its caller asked for that (WithAnswerFirst): her next
		// claim waits for it, her answer need not.
		defer afterAnswering(rctx, done)
		return s.takeIn(rctx, leases, p, req)
	}
	k := s.shards.shardOf(req.Login)
	backoff := 5 * time.Millisecond
	fresh := false // look the holder up past the list (a forward found it stale)
	for {
		// Taken before the look, so no change falls between: a shard
		// handed over (or renewed) wakes the wait below at once.
		changed := s.ClaimChanged(s.shards.ref(k))
		rctx, leases, done, ok, err := s.shards.enter(ctx, req.Login)
		step(ctx, enterStep(ok))
		if err != nil {
			return TakeAnswer{}, err
		} else if ok {
			defer done()
			return s.takeIn(rctx, leases, p, req)
		}
		url, self, ok, err := s.shards.holder(ctx, k, fresh)
		step(ctx, holderStep(ok, self))
		if err != nil && ctx.Err() == nil {
			// The store refuses to say who holds her shard (the API
			// server is down or refuses the portal): said at once, as a
			// claim lock's refusal is, rather than after the claim's
			// whole wait.
			return TakeAnswer{}, unavailable(err)
		}
		if ok && !self {
			a, err := s.shards.forward.ForwardTake(ctx, url, req)
			step(ctx, forwardStep(err))
			if !errors.Is(err, ErrNotHolder) && (err == nil || ErrorCode(err) != EInternal) {
				return a, err
			}
			// The holder gave the shard up, or did not answer: a take
			// it sent may have been written, and asking again (here
			// or at a new holder, which reads after it) finds it.
			s.log.Debug("claim not forwarded; looking for the shard's holder again", "shard", k, "err", err)
			fresh = true
		} else if !ok {
			s.shards.wake()
		}
		select {
		case <-ctx.Done():
			if err := s.shards.failing(); err != nil {
				return TakeAnswer{}, unavailable(err) // the store refuses the shards' requests too
			}
			return TakeAnswer{}, Errorf(EUnavailable, "Try again in a minute; if it keeps failing, tell an admin.",
				"The replica that runs your claims did not answer.")
		case <-changed:
			step(ctx, "shard-changed")
		case <-s.shards.clock.After(backoff):
			step(ctx, "pause")
		}
		backoff = min(backoff*2, 200*time.Millisecond)
	}
}

// takeIn runs req's take in ctx through leases, where its user's rules
// are kept.
func (s *Service) takeIn(ctx context.Context, leases Leases, p Pool, req TakeRequest) (TakeAnswer, error) {
	if req.Member != "" {
		l, err := s.takeAssigned(ctx, leases, p, Ref{Namespace: req.Namespace, Name: req.Member}, req.Login)
		return TakeAnswer{Lease: l, Won: err == nil}, err
	}
	return s.takeClaimed(ctx, leases, p, req.Login)
}
