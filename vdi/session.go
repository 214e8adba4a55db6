package vdi

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Lease annotations that carry the session facts a portal restart (or
// another replica) must see. Times are RFC 3339 with nanoseconds.
const (
	// AnnotationConsoles counts the open consoles of the member.
	AnnotationConsoles = "corral.dev/vdi-consoles"
	// AnnotationConsolesSeen is when a portal last confirmed its open
	// consoles; a count not confirmed for a while is a crashed portal's.
	AnnotationConsolesSeen = "corral.dev/vdi-consoles-seen"
	// AnnotationLastDisconnect is when the last console closed.
	AnnotationLastDisconnect = "corral.dev/vdi-last-disconnect"
	// AnnotationLastInput is when a console last carried real user input.
	AnnotationLastInput = "corral.dev/vdi-last-input"
	// AnnotationReclaiming names the rule reclaiming the member right now.
	AnnotationReclaiming = "corral.dev/vdi-reclaiming"
	// AnnotationReset holds, beside AnnotationReclaiming, how the member
	// is made fresh (a Growth, JSON): written with the mark, before
	// anything is deleted, so that whichever replica finishes the
	// reclaim can make the member again (see resetOf).
	AnnotationReset = "corral.dev/vdi-reset"
)

// HeartbeatEvery is how often a portal with open consoles confirms them
// (and renews the claim); after three missed beats they count as closed.
const HeartbeatEvery = 30 * time.Second

// SessionFacts are the session facts kept in a Lease's annotations.
type SessionFacts struct {
	Consoles       int
	ConsolesSeen   time.Time
	LastDisconnect time.Time
	LastInput      time.Time
}

// FactsOf reads the session facts of l. Malformed values (a Lease edited
// by hand) are reported in err and read as zero, never trusted.
func FactsOf(l *Lease) (SessionFacts, error) {
	var f SessionFacts
	var errs []error
	a := l.Annotations
	if v := a[AnnotationConsoles]; v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("annotation %s=%q is not a count", AnnotationConsoles, v))
		} else {
			f.Consoles = n
		}
	}
	for key, t := range map[string]*time.Time{
		AnnotationConsolesSeen: &f.ConsolesSeen, AnnotationLastDisconnect: &f.LastDisconnect, AnnotationLastInput: &f.LastInput,
	} {
		if v := a[key]; v != "" {
			parsed, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				errs = append(errs, fmt.Errorf("annotation %s=%q is not a time", key, v))
			} else {
				*t = parsed
			}
		}
	}
	return f, errors.Join(errs...)
}

// store writes f into l's annotations.
func (f SessionFacts) store(l *Lease) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	a := l.Annotations
	a[AnnotationConsoles] = strconv.Itoa(f.Consoles)
	for key, t := range map[string]time.Time{
		AnnotationConsolesSeen: f.ConsolesSeen, AnnotationLastDisconnect: f.LastDisconnect, AnnotationLastInput: f.LastInput,
	} {
		if t.IsZero() {
			delete(a, key)
		} else {
			a[key] = t.UTC().Format(time.RFC3339Nano)
		}
	}
}

// Open reports whether consoles are open at now: counted, and confirmed
// recently enough that the portal holding them is alive.
func (f SessionFacts) Open(now time.Time) bool {
	return f.Consoles > 0 && now.Sub(f.ConsolesSeen) < 3*HeartbeatEvery
}

// ConsoleOpened records a new console of ref's claim, which it renews.
func (s *Service) ConsoleOpened(ctx context.Context, ref Ref) error {
	return s.updateFacts(ctx, ref, func(f *SessionFacts, now time.Time) {
		if !f.Open(now) {
			f.Consoles = 0 // a crashed portal's count is stale
		}
		f.Consoles++
		f.ConsolesSeen = now
	})
}

// ConsoleClosed records that a console of ref closed; the last one closing
// starts the disconnect grace.
func (s *Service) ConsoleClosed(ctx context.Context, ref Ref) error {
	return s.updateFacts(ctx, ref, func(f *SessionFacts, now time.Time) {
		f.Consoles = max(f.Consoles-1, 0)
		if f.Consoles == 0 {
			f.LastDisconnect = now
		}
		f.ConsolesSeen = now
	})
}

// ConsoleHeartbeat confirms ref's open consoles and renews its claim.
func (s *Service) ConsoleHeartbeat(ctx context.Context, ref Ref) error {
	return s.updateFacts(ctx, ref, func(f *SessionFacts, now time.Time) { f.ConsolesSeen = now })
}

// Input records real user input on a console of ref at time at.
func (s *Service) Input(ctx context.Context, ref Ref, at time.Time) error {
	return s.updateFacts(ctx, ref, func(f *SessionFacts, _ time.Time) {
		if at.After(f.LastInput) {
			f.LastInput = at
		}
	})
}

// updateFacts applies change to the session facts of ref's live claim and
// renews it, retrying when another writer got there first. A claim that is
// gone (released, reclaimed) is not an error: there is nothing to update.
func (s *Service) updateFacts(ctx context.Context, ref Ref, change func(f *SessionFacts, now time.Time)) error {
	err := s.updateClaim(ctx, ref, "", func(l *Lease, now time.Time) error {
		f, err := FactsOf(l)
		if err != nil {
			s.log.Warn("ignoring malformed session facts", "desktop", ref, "err", err)
		}
		change(&f, now)
		f.store(l)
		l.RenewTime = now
		return nil
	})
	if ErrorCode(err) == EConflict && errors.Is(err, errClaimGone) {
		return nil
	}
	return err
}

// errClaimGone is the cause of an updateClaim on a claim that is gone.
var errClaimGone = errors.New("the claim is gone")

// updateClaim applies change to ref's live claim (held by holder, unless
// holder is empty) and writes it, retrying when another writer got there
// first. A claim that is gone, expired, being reclaimed or held by someone
// else is a conflict caused by errClaimGone; an error of change is
// returned as it is, with nothing written.
func (s *Service) updateClaim(ctx context.Context, ref Ref, holder string, change func(l *Lease, now time.Time) error) error {
	gone := &Error{Code: EConflict, Msg: fmt.Sprintf("Desktop %s is no longer claimed.", ref), Hint: "Reload the page to see it as it is now.", Err: errClaimGone}
	for range 5 {
		l, err := s.leases.Get(ctx, ref)
		if errors.Is(err, ErrNotFound) {
			return gone
		} else if err != nil {
			return err
		}
		now := s.now()
		if l.Expired(now) || l.Annotations[AnnotationReclaiming] != "" || (holder != "" && l.Holder != holder) {
			return gone
		}
		if err := change(l, now); err != nil {
			return err
		}
		if _, err = s.leases.Update(ctx, l); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("update the claim on %s: %w", ref, ErrConflict)
}
