package agent

import (
	"context"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TakeoverHold is how long a person's input on a desktop suspends its
// agent's: a person who types or points in the console takes control,
// and hands it back by letting go this long.
const TakeoverHold = 30 * time.Second

// personInputRefresh is how often, at most, one replica writes a
// person's continuing input on a desktop to its claim: elsewhere the
// agent's input waits from 25 to 30 s after the person's last.
const personInputRefresh = 5 * time.Second

// personInput is a person's latest input on a desktop.
type personInput struct {
	login   string
	at      time.Time
	written time.Time // when this replica last wrote it to the claim
}

// PersonInput notes that login, a person at a console of ref (never an
// agent), sent input there now: the agent's input waits, on this replica
// at once, on the others once the claim says so (written in the
// background, every personInputRefresh at most: the caller is a console's
// input path, which must not wait on the claim store).
func (s *Seat) PersonInput(ref vdi.Ref, login string) {
	now := time.Now()
	s.mu.Lock()
	if s.people == nil || len(s.people) > 4096 {
		s.people = map[vdi.Ref]personInput{}
	}
	p := s.people[ref]
	write := now.Sub(p.written) >= personInputRefresh
	if write {
		p.written = now
	}
	p.login, p.at = login, now
	s.people[ref] = p
	s.mu.Unlock()
	if write {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := s.cfg.Desktops.NotePersonInput(ctx, ref, login, now); err != nil && vdi.ErrorCode(err) != vdi.EConflict {
				s.cfg.Log.Warn("a person's input not recorded on the claim", "desktop", ref, "err", err)
			}
		}()
	}
}

// barred returns why an agent's call on d is refused, if it is: the
// oversight on its claim (vdi.AgentBarred), or, for input, a person's
// input within TakeoverHold, seen on this replica or recorded on the
// claim by any.
func (s *Seat) barred(d vdi.Desktop, input bool) error {
	if err := vdi.AgentBarred(d, input); err != nil || !input {
		return err
	}
	ref := vdi.Ref{Namespace: d.Namespace, Name: d.Name}
	s.mu.Lock()
	p := s.people[ref]
	s.mu.Unlock()
	if d.PersonInputAt.After(p.at) {
		p.login, p.at = d.PersonInputBy, d.PersonInputAt
	}
	if p.at.IsZero() || time.Since(p.at) >= TakeoverHold {
		return nil
	}
	return vdi.Errorf(vdi.EConflict, "", "%s took control of %s (their last input at %s): your input is suspended until %v after theirs ends; screenshot and wait_for_change still work",
		p.login, ref, p.at.UTC().Format("15:04:05"), TakeoverHold)
}

// A person takes control from an agent, or stops it, on the desktop's
// claim (vdi.Service.OverseeAgent), which every replica reads: each call
// checks it before it acts, and a call in flight is cut when the claim
// changes so (ClaimChanged, from any replica) or at once when the person
// acted through this replica (Oversaw).

// flight is a call in flight on a desktop.
type flight struct {
	cancel context.CancelCauseFunc
	input  bool
}

// fly registers a call of id on ref until done is called; the returned
// context is cut, its cause saying why, when the call becomes barred
// (vdi.AgentBarred) or the desktop is no longer id's.
func (s *Seat) fly(ctx context.Context, id vdi.Identity, ref vdi.Ref, input bool) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	f := &flight{cancel: cancel, input: input}
	s.mu.Lock()
	if s.flights == nil {
		s.flights = map[vdi.Ref]map[*flight]struct{}{}
	}
	if s.flights[ref] == nil {
		s.flights[ref] = map[*flight]struct{}{}
	}
	s.flights[ref][f] = struct{}{}
	s.mu.Unlock()
	go s.watchClaim(ctx, id, ref, f)
	return ctx, func() {
		cancel(nil)
		s.mu.Lock()
		delete(s.flights[ref], f)
		if len(s.flights[ref]) == 0 {
			delete(s.flights, ref)
		}
		s.mu.Unlock()
	}
}

// watchClaim cuts f when a change of ref's claim, made on any replica,
// bars it; it returns when ctx ends.
func (s *Seat) watchClaim(ctx context.Context, id vdi.Identity, ref vdi.Ref, f *flight) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Desktops.ClaimChanged(ref):
		}
		d, err := s.cfg.Desktops.Desktop(ctx, id, ref)
		switch {
		case err == nil && d.Holder != id.Login:
			err = vdi.Errorf(vdi.EForbidden, "", "desktop %s is no longer claimed by %s", ref, id.Login)
		case err == nil:
			err = s.barred(d, f.input)
		case vdi.ErrorCode(err) != vdi.EForbidden && vdi.ErrorCode(err) != vdi.ENotFound:
			err = nil // the claim store did not answer: judge at the next change
		}
		if err != nil {
			f.cancel(err)
			return
		}
	}
}

// Oversaw tells the seat that a person took control of d from its agent
// or stopped it through this replica: its calls in flight that are now
// barred end at once, and a stopped agent's screen is closed.
func (s *Seat) Oversaw(d vdi.Desktop) {
	ref := vdi.Ref{Namespace: d.Namespace, Name: d.Name}
	s.mu.Lock()
	for f := range s.flights[ref] {
		if err := vdi.AgentBarred(d, f.input); err != nil {
			f.cancel(err)
		}
	}
	s.mu.Unlock()
	if d.AgentStopped != "" {
		s.seats.close(ref)
	}
}

// cut returns why ctx, a call's context from fly, was cut, or err.
func cut(ctx context.Context, err error) error {
	if cause := context.Cause(ctx); ctx.Err() != nil && cause != nil && vdi.ErrorCode(cause) != vdi.EInternal {
		return cause
	}
	return err
}
