package vdi

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Reclaim rules, in the order they are checked.
const (
	RuleDisconnect = "disconnect-grace"
	RuleMaxSession = "max-session"
	RuleIdle       = "idle"
	// RuleExpired reclaims a member whose claim ran out unrenewed (its
	// portal died): nobody holds it, but it may still be running.
	RuleExpired = "lease-expired"
)

// What a release marks its claim with while the member is reset
// (AnnotationReclaiming), where a reclaim marks its rule: a release by the
// holder, or by an admin for another user.
const (
	MarkRelease      = "release"
	MarkForceRelease = "force-release"
)

// Deadline is the next reclaim a claim faces: which rule, and when.
type Deadline struct {
	Rule string    `json:"rule"`
	At   time.Time `json:"at"`
}

// Effective returns p with zero fields taken from defaults.
func (p Policy) Effective(defaults Policy) Policy {
	if p.DisconnectGrace == 0 {
		p.DisconnectGrace = defaults.DisconnectGrace
	}
	if p.MaxSession == 0 {
		p.MaxSession = defaults.MaxSession
	}
	if p.IdleTimeout == 0 {
		p.IdleTimeout = defaults.IdleTimeout
	}
	if p.Network == "" {
		p.Network = defaults.Network
	}
	return p
}

// Next returns the earliest reclaim deadline of a claim under p, and false
// when no rule applies. Disconnect grace runs while no console is open,
// from the last disconnect (or the claim, if no console ever opened); max
// session from the claim; idle from the last real input (or the claim).
func (p Policy) Next(l *Lease, f SessionFacts, now time.Time) (Deadline, bool) {
	var next Deadline
	consider := func(rule string, at time.Time) {
		if next.Rule == "" || at.Before(next.At) {
			next = Deadline{rule, at}
		}
	}
	if p.DisconnectGrace > 0 && !f.Open(now) {
		since := latest(l.AcquireTime, f.LastDisconnect)
		if f.Consoles > 0 { // consoles of a portal that stopped confirming them
			since = latest(since, f.ConsolesSeen)
		}
		consider(RuleDisconnect, since.Add(p.DisconnectGrace))
	}
	if p.MaxSession > 0 {
		consider(RuleMaxSession, l.AcquireTime.Add(p.MaxSession))
	}
	if p.IdleTimeout > 0 {
		consider(RuleIdle, latest(l.AcquireTime, f.LastInput).Add(p.IdleTimeout))
	}
	return next, next.Rule != ""
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Deadline returns the next reclaim deadline of ref's live claim.
func (s *Service) Deadline(ctx context.Context, ref Ref) (Deadline, bool, error) {
	l, err := s.leases.Get(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return Deadline{}, false, nil
	} else if err != nil {
		return Deadline{}, false, unavailable(err)
	}
	p, err := s.backend.Pool(ctx, l.Namespace, l.Pool)
	if err != nil {
		return Deadline{}, false, err
	}
	f, _ := FactsOf(l)
	d, ok := p.Policy.Effective(s.policy).Next(l, f, s.now())
	return d, ok, nil
}

// ReclaimDue reclaims every claim whose deadline has passed and returns how
// many it reclaimed. Each is first marked with a compare-and-swap on its
// Lease, so a claim renewed (or reclaimed by another replica) in between
// is left alone. A long reset is only started: it ends after ReclaimDue
// returns, as a release's does (see reclaim).
func (s *Service) ReclaimDue(ctx context.Context) (int, error) {
	// With the pools whose every member is being made fresh: a reset cut
	// short there (its replica died after deleting the member) is
	// finished too, never left with no member.
	pools, err := s.listedPools(ctx, nil)
	if err != nil {
		return 0, err
	}
	now := s.now()
	n := 0
	var errs []error
	for _, p := range pools {
		leases, err := s.leases.List(ctx, p.Namespace, p.Name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		policy := p.Policy.Effective(s.policy)
		for _, l := range leases {
			f, ferr := FactsOf(l)
			if ferr != nil {
				s.log.Warn("malformed session facts on claim", "desktop", l.Ref(), "err", ferr)
			}
			rule := l.Annotations[AnnotationReclaiming]
			if s.resetting(l) {
				continue // being reclaimed or released right now, maybe by another replica
			}
			if rule == "" {
				d, ok := policy.Next(l, f, now)
				if l.Expired(now) {
					d, ok = Deadline{RuleExpired, now}, true
				}
				if !ok || d.At.After(now) {
					continue
				}
				rule = d.Rule
			}
			// A long reset (a re-clone) goes on detached, as a release's
			// does, so that one slow clone never holds the loop (nor the
			// other members' reclaims) up.
			if err := s.reclaim(ctx, l, rule, reclaimText(rule), true); err != nil {
				var refused refusedReset
				switch {
				case errors.As(err, &refused):
					s.reclaimRefused(l, rule, refused)
				case ErrorCode(err) != EConflict: // a conflict: renewed or reclaimed meanwhile
					errs = append(errs, fmt.Errorf("reclaim %s (%s): %w", l.Ref(), rule, err))
				}
				continue
			}
			s.refusals.forget(l.Ref())
			n++
			s.counts.reclaimed(rule)
			s.sampling.reclaimed(l.Namespace, l.Pool, rule)
			s.record(ctx, AuditEvent{Actor: "portal", Action: "reclaim", Namespace: l.Namespace, Target: l.Member,
				Detail: fmt.Sprintf("rule %s; holder %s", rule, l.Holder)})
			s.log.Info("reclaimed", "desktop", l.Ref(), "holder", l.Holder, "rule", rule)
		}
	}
	return n, errors.Join(errs...)
}

// reclaimStale is how long a reclaim's mark on a Lease must stay
// unchanged, as this replica sees it (reclaim_stale.go), before the
// reclaim loop finishes it, taking it for one a crash interrupted: a
// reclaim at work renews its mark every markRenewal however long its
// reset takes (a re-clone on slow storage: minutes), so one still at work
// elsewhere is never done twice, and one a crash cut short is finished
// within about a minute.
const reclaimStale = 30 * time.Second

func reclaimText(rule string) string {
	switch rule {
	case RuleIdle:
		return "The desktop was reclaimed: no input for too long."
	case RuleMaxSession:
		return "The desktop was reclaimed: the session reached its time limit."
	}
	return "The desktop was reclaimed."
}

// RunReclaimer checks for due reclaims, finishes jobs whose portal
// stopped, keeps the pools' warm standby and repairs claim mirrors and
// pool definitions every interval until ctx
// ends; a claim or release on this portal, or a
// claim on another replica that its Leases report (AcquireNotifier),
// makes it look again for standby after the refill delay.
func (s *Service) RunReclaimer(ctx context.Context, every time.Duration) {
	if n, ok := s.leases.(AcquireNotifier); ok {
		s.notifyOnce.Do(func() { n.OnAcquire(s.kickStandby) })
	}
	t := time.NewTicker(every)
	defer t.Stop()
	s.resumeJobs(ctx)
	s.repairDefinitions(ctx)
	s.keepStandby(ctx)
	var refill <-chan time.Time // set while a refill waits
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.standbyKick:
			if refill == nil {
				refill = time.After(max(s.refillDelay, 0))
			}
		case <-refill:
			refill = nil
			s.keepStandby(ctx)
		case <-t.C:
			if _, err := s.ReclaimDue(ctx); err != nil && ctx.Err() == nil {
				s.log.Error("reclaim", "err", err)
			}
			if _, err := s.RepairMirrors(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("repair claim mirrors", "err", err)
			}
			s.resumeJobs(ctx)
			s.repairDefinitions(ctx)
			s.keepStandby(ctx)
		}
	}
}

func (s *Service) resumeJobs(ctx context.Context) {
	if _, err := s.ResumeJobs(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("resume jobs", "err", err)
	}
	if _, err := s.SweepJobs(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("sweep ended jobs", "err", err)
	}
}

func (s *Service) keepStandby(ctx context.Context) {
	if _, err := s.KeepStandby(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("standby", "err", err)
	}
}
