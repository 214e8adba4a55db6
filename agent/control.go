package agent

import (
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TakeoverHold is how long a person's input on a desktop suspends its
// agent's: a person who types or points in the console takes control,
// and hands it back by letting go this long.
const TakeoverHold = 30 * time.Second

// personInput is a person's latest input on a desktop.
type personInput struct {
	login string
	at    time.Time
}

// PersonInput notes that login, a person at a console of ref (never an
// agent), sent input there now: the agent's input waits.
func (s *Seat) PersonInput(ref vdi.Ref, login string) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.people == nil || len(s.people) > 4096 {
		s.people = map[vdi.Ref]personInput{}
	}
	s.people[ref] = personInput{login: login, at: now}
}

// suspended fails while a person has control of ref.
func (s *Seat) suspended(ref vdi.Ref) error {
	s.mu.Lock()
	p, ok := s.people[ref]
	s.mu.Unlock()
	if !ok || time.Since(p.at) >= TakeoverHold {
		return nil
	}
	return vdi.Errorf(vdi.EConflict, "", "%s took control of %s (their last input at %s): your input is suspended until %v after theirs ends; screenshot and wait_for_change still work",
		p.login, ref, p.at.UTC().Format("15:04:05"), TakeoverHold)
}
