package vdi

import (
	"context"
	"errors"
	"time"
)

// Claim gives id a member of the pool and powers it on, when the pool's
// access lets id in and the quotas leave room. Asking again returns the
// same member; the rules hold across replicas (claim_rules.go). It prefers a running member, then a stopped one, trying
// each at most once and moving on when another claimant wins it; when none is
// free (or every try was lost) it fails with EConflict.
func (s *Service) Claim(ctx context.Context, id Identity, namespace, pool string) (Desktop, error) {
	return s.claim(ctx, id, namespace, pool, false)
}

// ClaimStarting claims as Claim does, but answers as soon as the claim is
// won and its member asked to start: a member slow to start (a VM that
// boots, see StartAsker) is answered "starting", and the console page
// waits for it, so no request waits out a boot.
func (s *Service) ClaimStarting(ctx context.Context, id Identity, namespace, pool string) (Desktop, error) {
	return s.claim(ctx, id, namespace, pool, true)
}

func (s *Service) claim(ctx context.Context, id Identity, namespace, pool string, atOnce bool) (_ Desktop, err error) {
	ctx, trace := withClaimTrace(ctx)
	defer func() { s.logTrace(trace, "claim", id.Login, err) }()
	if err := id.May(ScopeClaim); err != nil {
		return Desktop{}, err
	}
	p, err := s.backend.Pool(ctx, namespace, pool)
	if err != nil {
		return Desktop{}, err
	}
	if !id.Reaches(namespace, pool) {
		return Desktop{}, outOfScope(id, namespace, pool)
	}
	if !p.Allows(id) {
		return Desktop{}, forbidden(p)
	}
	// The claim's own store requests are bounded (claimWait); the
	// member's start keeps the request's time.
	startCtx := ctx
	ctx, cancel := context.WithTimeout(ctx, s.claimWait)
	defer cancel()
	step(ctx, "pool")
	a, err := s.route(ctx, p, TakeRequest{Login: id.Login, Namespace: namespace, Pool: pool})
	if err != nil {
		return Desktop{}, err
	}
	if a.Won {
		s.record(ctx, AuditEvent{Actor: id.Login, Action: "claim", Namespace: namespace, Target: a.Lease.Member, Detail: "pool " + pool})
		s.log.Info("claimed", "desktop", a.Lease.Ref(), "holder", id.Login)
		s.kickStandby() // a warm member went: refill
		step(ctx, "audit")
	}
	// Asking again also finishes what a failure left undone.
	s.mirror(a.Lease)
	d, err := s.powerOn(startCtx, a.Lease, atOnce)
	step(ctx, "power")
	return d, err
}

// takeClaimed takes a member of pool p for login through claims, the
// store where her rules are kept (claim_take.go), or finds the one of p
// she holds: the claim's reads and its one write.
func (s *Service) takeClaimed(ctx context.Context, claims Leases, p Pool, login string) (TakeAnswer, error) {
	namespace, pool := p.Namespace, p.Name
	tried := map[string]bool{}
	quotaChecked := false
	for attempts := 0; attempts < maxClaimAttempts; {
		// Listing is cheap (a cache on Kubernetes), so every round sees the
		// claims that beat this one and skips their members.
		listed := time.Now()
		leases, err := s.leases.List(ctx, namespace, pool)
		step(ctx, "list")
		if err != nil {
			return TakeAnswer{}, unavailable(err)
		}
		now := s.now()
		known := make(map[string]*Lease, len(leases))
		for _, l := range leases {
			if l.claimOf(login, now) {
				// The list may be a cache a moment behind a release on
				// another replica (its Lease deleted, or marked while the
				// member is made fresh): the Lease itself must still say so.
				fresh, err := s.leases.Get(ctx, l.Ref())
				step(ctx, "get")
				if errors.Is(err, ErrNotFound) {
					continue // released: the member is free
				} else if err != nil {
					return TakeAnswer{}, unavailable(err)
				}
				if fresh.claimOf(login, now) {
					return TakeAnswer{Lease: fresh}, nil
				}
				l = fresh
			}
			known[l.Member] = l
		}
		if !quotaChecked {
			if err := s.checkQuota(ctx, login, p); err != nil {
				return TakeAnswer{}, err
			}
			quotaChecked = true
			step(ctx, "quota")
		}
		r := s.spread.ranking(known, tried, now, login, claimCandidates)
		if err := WalkMembers(ctx, s.backend, namespace, pool, r.add); err != nil {
			return TakeAnswer{}, err
		}
		free := r.leaders()
		step(ctx, "members")
		if len(free) == 0 {
			break
		}
		for i := 0; i < len(free); i++ {
			if attempts == maxClaimAttempts {
				break
			}
			m := free[i]
			var l *Lease
			var err error
			if batch := newLeases(claims, free[i:], known); len(batch) > 0 {
				// Members never claimed, tried in one turn of the store:
				// one attempt.
				for _, want := range batch {
					tried[want.Member] = true
				}
				attempts++
				i += len(batch) - 1
				l, err = claims.(LeaseBatcher).CreateFirst(ctx, s.wants(p, batch, login))
				if errors.Is(err, ErrAlreadyExists) {
					s.counts.lostRace()
					break // every one went meanwhile: look again
				} else if err == nil {
					m = memberOf(free, l.Member)
				}
			} else {
				// The first member no other claim here is writing now.
				if j := s.trying.pick(free[i:], listed); j > 0 {
					free[i], free[i+j] = free[i+j], free[i]
					m = free[i]
				}
				attempts++
				tried[m.Name] = true
				l, err = s.acquire(ctx, claims, p, m, known[m.Name], login)
				s.trying.done(m.Ref(), err == nil || errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict), time.Now())
			}
			step(ctx, writeStep(err))
			var held *holdsInPool
			var refused *Error
			if errors.As(err, &held) {
				// Another claim of this user won a desktop of the pool
				// meanwhile: this claim is that one.
				return TakeAnswer{Lease: held.l}, nil
			} else if errors.As(err, &refused) {
				return TakeAnswer{}, refused // a quota, checked in the write
			} else if errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict) {
				// Lost the race for this member: its claim is someone else's
				// now. Look again at what is left once this portal's list
				// shows that claim, else after a few losses.
				s.counts.lostRace()
				if errors.Is(err, ErrAlreadyExists) && s.awaitWin(ctx, m.Ref(), pool) {
					step(ctx, "winner-seen")
					break
				}
				step(ctx, "winner-unseen")
				if attempts%claimRelistEvery == 0 {
					break
				}
				continue
			} else if err != nil {
				return TakeAnswer{}, unavailable(err)
			}
			s.counts.claimed(m.Power)
			return TakeAnswer{Lease: l, Won: true}, nil
		}
	}
	s.sampling.refused(p)
	e := Errorf(EConflict, "Try again later, or ask an admin to free one.", "No free desktops in pool %s.", pool)
	e.Err = ErrNoneFree
	return TakeAnswer{}, e
}

// newLeasesBatch bounds the members a claim tries in one turn of the
// store: enough that racing claimants, which try free members in orders
// of their own, rarely lose them all, while a turn's cost (the candidates
// sent and checked) stays that of a small pool's claim however many
// members a large pool has free.
const newLeasesBatch = 16

// newLeases returns the leading members of free that never had a Lease
// (newLeasesBatch at most), when leases can try them in one turn
// (LeaseBatcher).
func newLeases(leases Leases, free []Member, known map[string]*Lease) []*Lease {
	if _, ok := leases.(LeaseBatcher); !ok {
		return nil
	}
	var out []*Lease
	for _, m := range free {
		if known[m.Name] != nil || len(out) == newLeasesBatch {
			break
		}
		out = append(out, &Lease{Namespace: m.Namespace, Member: m.Name})
	}
	return out
}

// wants fills in the Leases holder would take on batch's members of p.
func (s *Service) wants(p Pool, batch []*Lease, holder string) []*Lease {
	now := s.now()
	for _, w := range batch {
		w.Pool, w.Holder, w.AcquireTime, w.RenewTime, w.Duration = p.Name, holder, now, now, s.duration
	}
	return batch
}

// memberOf returns the member of members named name.
func memberOf(members []Member, name string) Member {
	for _, m := range members {
		if m.Name == name {
			return m
		}
	}
	return Member{}
}

// Claim bounds: each member is tried at most once per claim and at most
// maxClaimAttempts tries in all (a LeaseBatcher's turn over several
// members is one); the free list is refreshed after every
// claimRelistEvery lost races, and after a lost turn.
const (
	maxClaimAttempts = 64
	claimRelistEvery = 4
)

// acquire takes m's Lease for holder in leases: Create when none was seen (a Lease
// that exists after all means another claimant won: ErrAlreadyExists), or
// Update carrying the observed resourceVersion of old when it expired (a
// newer Lease means another claimant won: ErrConflict).
func (s *Service) acquire(ctx context.Context, leases Leases, p Pool, m Member, old *Lease, holder string) (*Lease, error) {
	now := s.now()
	want := &Lease{
		Namespace: m.Namespace, Member: m.Name, Pool: p.Name, Holder: holder,
		AcquireTime: now, RenewTime: now, Duration: s.duration,
	}
	if old == nil {
		return leases.Create(ctx, want)
	}
	if !old.Expired(now) {
		return nil, ErrConflict
	}
	want.ResourceVersion = old.ResourceVersion
	l, err := leases.Update(ctx, want)
	if err == nil {
		s.record(ctx, AuditEvent{Actor: holder, Action: "takeover", Namespace: m.Namespace, Target: m.Name, Detail: "expired claim of " + old.Holder})
	}
	return l, err
}

// StartAsker is a Backend whose members take long to start (a VM boots):
// AskStart asks the platform to start ref and returns once the platform
// took the request, not once the member runs.
type StartAsker interface {
	AskStart(ctx context.Context, ref Ref) error
}

// powerOn starts the claimed member if it is not running and returns it;
// with atOnce, a backend that can (StartAsker) is only asked to start it,
// and the member is answered as starting.
func (s *Service) powerOn(ctx context.Context, l *Lease, atOnce bool) (Desktop, error) {
	m, err := s.backend.Member(ctx, l.Ref())
	if err != nil {
		return Desktop{}, err
	}
	if m.Power != PowerRunning {
		start := s.backend.Start
		sa, ask := s.backend.(StartAsker)
		if ask = ask && atOnce; ask {
			start = sa.AskStart
		}
		if err := start(ctx, l.Ref()); err != nil {
			s.log.Error("start failed", "desktop", l.Ref(), "err", err)
			return Desktop{}, &Error{Code: EUnavailable, Err: err,
				Msg:  "Desktop " + l.Ref().String() + " is yours but did not start.",
				Hint: "Try again; if it keeps failing, release it and get another, or ask an admin."}
		}
		if m, err = s.backend.Member(ctx, l.Ref()); err != nil {
			return Desktop{}, err
		}
		if ask && m.Power != PowerRunning && m.Power != PowerFailed {
			m.Power = PowerStarting // asked: a cache may not show it yet
		}
	}
	p, err := s.backend.Pool(ctx, l.Namespace, l.Pool)
	if err != nil {
		return Desktop{}, err
	}
	return s.desktop(m, l, p), nil
}
