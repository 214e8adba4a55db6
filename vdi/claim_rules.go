package vdi

import "context"

// A user's rules (one desktop per pool, the quotas) read the Leases the
// user holds before a claim writes one more, so racing claims of one user
// on several replicas must not both pass the reading. A store that can
// check the rules in the very write that takes the member, under a lock
// of the holder held until that write is done (HolderChecks: PostgreSQL's
// advisory locks), makes a claim one write; with any other store
// the claim holds the user's claim lock throughout (claim_lock.go).

// HolderChecks is implemented by a Leases store that can check a write
// against its holder's other Leases within the write.
type HolderChecks interface {
	// CheckedBy returns the store whose writes of a Lease (Create, Update
	// and, when it has it, LeaseBatcher's CreateFirst) first take a lock
	// of holder, which every client of the store honours and which is held
	// until the write is done; then pass check every Lease holder has at
	// that moment, in every namespace; and write only when check returns
	// nil. check's error is returned as it is. ok is false when the store
	// cannot, and the caller takes the claim lock instead.
	CheckedBy(holder string, check func(held []*Lease) error) (leases Leases, ok bool)
}

// holdsInPool is the rules' answer to a claim when its user already holds
// a desktop of the pool: the claim is answered with that desktop.
type holdsInPool struct{ l *Lease }

func (h *holdsInPool) Error() string { return "vdi: already holds " + h.l.Ref().String() }

// ruled returns the store that a claim (onePerPool) or an assignment of
// a desktop of pool p for login writes through, the context its reads
// take from then on, and the function to call when it is done: a store
// that checks login's rules in its writes (see rules), else s.leases
// with login's claim lock taken, read after it (WithReadAfter) and ended
// before the lock runs out (lockClaims).
func (s *Service) ruled(ctx context.Context, login string, p Pool, onePerPool bool) (context.Context, Leases, func(), error) {
	if hc, ok := s.leases.(HolderChecks); ok {
		var counted map[string]bool // set before the first write
		if l, ok := hc.CheckedBy(login, func(held []*Lease) error { return s.rules(login, p, onePerPool, counted, held) }); ok {
			if s.quotaApplies(p) {
				// Read now, not in the write: the backend may read the
				// database the write holds a connection of.
				pools, err := s.backend.Pools(ctx)
				if err != nil {
					return nil, nil, nil, err
				}
				counted = make(map[string]bool, len(pools))
				for _, q := range pools {
					counted[q.Namespace+"/"+q.Name] = true
				}
			}
			return ctx, l, func() {}, nil
		}
	}
	unlock, rv, until, err := s.lockClaims(ctx, p.Namespace, login)
	if err != nil {
		return nil, nil, nil, err
	}
	if until.IsZero() {
		return WithReadAfter(ctx, rv, login), s.leases, unlock, nil
	}
	ctx, cancel := context.WithDeadline(ctx, until)
	return WithReadAfter(ctx, rv, login), s.leases, func() { cancel(); unlock() }, nil
}

// rules checks one more desktop of pool p for login against held, the
// Leases login holds: the quotas, as checkQuota does, counting the
// desktops of the pools in counted (the backend's), and with onePerPool
// (a claim) the answer holdsInPool when login holds a desktop of p.
func (s *Service) rules(login string, p Pool, onePerPool bool, counted map[string]bool, held []*Lease) error {
	now := s.now()
	var mine []heldDesktop
	for _, l := range held {
		if !l.claimOf(login, now) {
			continue
		}
		if onePerPool && l.Namespace == p.Namespace && l.Pool == p.Name {
			return &holdsInPool{l}
		}
		if pool := l.Namespace + "/" + l.Pool; counted[pool] {
			mine = append(mine, heldDesktop{ref: l.Ref(), pool: pool})
		}
	}
	if !s.quotaApplies(p) {
		return nil
	}
	return s.quotaRule(p, mine)
}
