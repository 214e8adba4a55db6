package vdi

import (
	"context"
	"errors"
	"maps"
	"time"
)

// Release ends id's claim on ref: persistent members stop, ephemeral ones are
// recreated, then the Lease is deleted. An admin releasing another user's
// desktop is a force-release, audit-logged with reason. Open consoles are
// closed with a message first. A failed power step keeps the claim. A
// claim on a member that no longer exists (deleted by hand) is let go.
//
// A reset that is long (any on Kubernetes: a re-clone, a VM's stop, a CT
// Pod made fresh) goes on after Release returns, on the portal's own
// context, not the request's: the claim stays marked (so nobody gets the
// member meanwhile, its holder included) until the member is fresh, and a
// replica that dies meanwhile leaves it to another's reclaim loop.
// Releasing a desktop whose release is already under way does nothing
// more.
func (s *Service) Release(ctx context.Context, id Identity, ref Ref, reason string) error {
	if err := id.May(ScopeClaim); err != nil {
		return err
	}
	_, gone := s.backend.Member(ctx, ref)
	if gone != nil && ErrorCode(gone) != ENotFound {
		return gone
	}
	var l *Lease
	var action string
	// A console closing (or opening) at the same moment updates the Lease
	// too, and the release's compare-and-swap then loses: read it again and
	// retry, a few times, rather than tell the user to.
	for attempt := 0; ; attempt++ {
		var err error
		l, err = s.authorize(ctx, id, ref)
		if gone != nil && (err != nil || l == nil) {
			return gone // no such member, and no claim of the caller's on it
		}
		if err != nil {
			return err
		}
		if l == nil {
			return Errorf(EConflict, "Nothing to release.", "Desktop %s is not claimed.", ref)
		}
		if s.resetting(l) {
			return nil
		}
		text := "The desktop was released."
		action = MarkRelease
		if l.Holder != id.Login {
			action, text = MarkForceRelease, "An admin ("+id.Login+") released this desktop."
			if reason != "" {
				text += " Reason: " + reason
			}
		}
		err = s.reclaim(ctx, l, action, text, true)
		if err == nil {
			break
		}
		if ErrorCode(err) != EConflict || errors.As(err, new(refusedReset)) || attempt == 3 {
			return err // a refused reset is not a race: asking again changes nothing
		}
	}
	detail := "holder " + l.Holder
	if reason != "" {
		detail += "; reason: " + reason
	}
	s.record(ctx, AuditEvent{Actor: id.Login, Action: action, Namespace: ref.Namespace, Target: ref.Name, Detail: detail})
	s.log.Info(action, "desktop", ref, "holder", l.Holder, "by", id.Login)
	s.kickStandby() // the member is free (and, if ephemeral, fresh) again
	return nil
}

// reclaim takes the member of l back: it marks the Lease with rule (a
// compare-and-swap, so console updates stop and a claim renewed meanwhile
// is not taken) and with how the member is reset (AnnotationReset),
// closes the member's consoles with text and waits for them to close (so
// that they tell their users why before the desktop goes), resets the
// member as its pool's mode says, and deletes the Lease. A crash at any
// step leaves a marked Lease that the reclaim loop finishes. With detach,
// a long reset (see resetOf) goes on after reclaim returns, on the
// portal's own context (StopJobs ends it as a crash would).
func (s *Service) reclaim(ctx context.Context, l *Lease, rule, text string, detach bool) error {
	reset, long, plan, err := s.resetOf(ctx, l)
	if ErrorCode(err) == EConflict {
		return refusedReset{err}
	} else if err != nil {
		return err
	}
	// A mark a crash left is written again too: of two replicas taking it
	// over, one wins.
	marked := *l
	marked.Annotations = maps.Clone(l.Annotations)
	if marked.Annotations == nil {
		marked.Annotations = map[string]string{}
	}
	if marked.Annotations[AnnotationReclaiming] == "" {
		marked.Annotations[AnnotationReclaiming] = rule
	}
	if plan != "" {
		marked.Annotations[AnnotationReset] = plan
	}
	// Each renewal is a new version, by which the other replicas judge
	// the mark (reclaim_stale.go); the renew time only says when.
	marked.RenewTime = s.now()
	if l, err = s.leases.Update(ctx, &marked); err != nil {
		if errors.Is(err, ErrConflict) {
			return Errorf(EConflict, "Look at the desktop again and retry.", "Desktop %s changed while it was being released.", marked.Ref())
		}
		return unavailable(err)
	}
	s.closeConsoles(l.Ref(), errors.New(text))
	if !detach || !long {
		return s.finishReset(ctx, l, reset)
	}
	s.jobsWG.Add(1)
	go func() {
		defer s.jobsWG.Done()
		if err := s.finishReset(s.jobCtx, l, reset); err != nil {
			// The mark goes stale; the reclaim loop tries again.
			s.log.Warn("reset after the claim ended", "desktop", l.Ref(), "rule", rule, "err", err)
			return
		}
		s.log.Info("reset after the claim ended done", "desktop", l.Ref(), "rule", rule)
		s.kickStandby() // the member is free and fresh again
	}()
	return nil
}

// finishReset resets l's member with reset while renewing its mark, then
// deletes the claim; a failed reset keeps it.
func (s *Service) finishReset(ctx context.Context, l *Lease, reset func(context.Context) error) error {
	// The mark is renewed while the reset works, so that no other replica
	// takes a long recreate for one a crash interrupted (reclaimStale).
	work, renewed := s.renewMark(ctx, l)
	err := reset(work)
	l, lost := renewed()
	if lost {
		return Errorf(EConflict, "Look at the desktop again.", "Desktop %s was taken over by another portal while it was being reset.", l.Ref())
	}
	if err != nil {
		return &Error{Code: EUnavailable, Err: err,
			Msg:  "Desktop " + l.Ref().String() + " could not be stopped; it is still claimed.",
			Hint: "Try releasing it again; if that fails, ask an admin."}
	}
	// Clear the presentation copy of the claim; the Lease below is what
	// counts.
	s.unmirror(l.Ref())
	if err := s.leases.Delete(ctx, l); err != nil && !errors.Is(err, ErrNotFound) {
		return unavailable(err)
	}
	return nil
}

// markRenewal is how often a reclaim at work renews its mark; well inside
// reclaimStale.
const markRenewal = 5 * time.Second

// renewMark renews the reclaim mark on l every markRenewal until done is
// called, which returns the Lease as last written and whether another
// replica took it over meanwhile (a renewal that conflicts: the work's
// context is then cancelled, and the caller must not delete the Lease).
func (s *Service) renewMark(ctx context.Context, l *Lease) (context.Context, func() (*Lease, bool)) {
	ctx, cancel := context.WithCancel(ctx)
	stop := make(chan struct{})
	ended := make(chan struct{})
	lost := false
	go func() {
		defer close(ended)
		t := time.NewTicker(markRenewal)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
			}
			next := *l
			next.RenewTime = s.now()
			got, err := s.leases.Update(ctx, &next)
			switch {
			case err == nil:
				l = got
			case errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound):
				lost = true
				cancel()
				return
			}
		}
	}()
	return ctx, func() (*Lease, bool) {
		close(stop)
		<-ended
		cancel()
		return l, lost
	}
}
