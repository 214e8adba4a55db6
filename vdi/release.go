package vdi

import (
	"context"
	"errors"
	"maps"
)

// Release ends id's claim on ref: persistent members stop, ephemeral ones are
// recreated, then the Lease is deleted. An admin releasing another user's
// desktop is a force-release, audit-logged with reason. Open consoles are
// closed with a message first. A failed power step keeps the claim. A
// claim on a member that no longer exists (deleted by hand) is let go.
func (s *Service) Release(ctx context.Context, id Identity, ref Ref, reason string) error {
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
		text := "The desktop was released."
		action = "release"
		if l.Holder != id.Login {
			action, text = "force-release", "An admin ("+id.Login+") released this desktop."
			if reason != "" {
				text += " Reason: " + reason
			}
		}
		err = s.reclaim(ctx, l, action, text)
		if err == nil {
			break
		}
		if ErrorCode(err) != EConflict || attempt == 3 {
			return err
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
// is not taken), closes the member's consoles with text and waits for them
// to close (so that they tell their users why before the desktop goes),
// resets the member as its pool's mode says, and deletes the Lease. A crash at any step
// leaves a marked Lease that the reclaim loop finishes.
func (s *Service) reclaim(ctx context.Context, l *Lease, rule, text string) error {
	if l.Annotations[AnnotationReclaiming] == "" {
		marked := *l
		marked.Annotations = maps.Clone(l.Annotations)
		if marked.Annotations == nil {
			marked.Annotations = map[string]string{}
		}
		marked.Annotations[AnnotationReclaiming] = rule
		// The renew time dates the mark: see reclaimStale.
		marked.RenewTime = s.now()
		var err error
		if l, err = s.leases.Update(ctx, &marked); err != nil {
			if errors.Is(err, ErrConflict) {
				return Errorf(EConflict, "Look at the desktop again and retry.", "Desktop %s changed while it was being released.", marked.Ref())
			}
			return unavailable(err)
		}
	}
	s.closeConsoles(l.Ref(), errors.New(text))
	// A pool or member that is gone (deleted by hand) has nothing to reset.
	p, err := s.backend.Pool(ctx, l.Namespace, l.Pool)
	switch {
	case ErrorCode(err) == ENotFound:
		err = nil
	case err != nil:
		return err
	case p.Mode == ModeEphemeral:
		err = s.backend.Recreate(ctx, l.Ref())
	default:
		err = s.backend.Stop(ctx, l.Ref())
	}
	if err != nil && ErrorCode(err) != ENotFound {
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
