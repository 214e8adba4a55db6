package vdi

import (
	"context"
	"time"
)

// consoleCloseWait bounds how long releasing or reclaiming a desktop waits
// for its open consoles to close (their close frames sent, with the
// reason) before it stops the desktop: a console whose desktop stopped
// first would hear the desktop go and tell its user it is stopped, with a
// Start that can only fail, instead of that it was released.
const consoleCloseWait = 5 * time.Second

// trackedConsole is one open console of a desktop on this portal: how to
// end it, and a channel closed once it has ended.
type trackedConsole struct {
	cancel context.CancelCauseFunc
	done   chan struct{}
}

// TrackConsole registers an open console of ref so that releasing or
// reclaiming the desktop can close it with a reason. Call the returned
// function when the console ends.
func (s *Service) TrackConsole(ref Ref, cancel context.CancelCauseFunc) (untrack func()) {
	s.consolesMu.Lock()
	defer s.consolesMu.Unlock()
	s.consoleSeq++
	id := s.consoleSeq
	if s.consoles[ref] == nil {
		s.consoles[ref] = map[int]trackedConsole{}
	}
	c := trackedConsole{cancel: cancel, done: make(chan struct{})}
	s.consoles[ref][id] = c
	return func() {
		s.consolesMu.Lock()
		defer s.consolesMu.Unlock()
		if _, ok := s.consoles[ref][id]; !ok {
			return // untracked already
		}
		close(c.done)
		delete(s.consoles[ref], id)
		if len(s.consoles[ref]) == 0 {
			delete(s.consoles, ref)
		}
	}
}

// closeConsoles ends every console of ref open on this portal with cause
// and waits (up to consoleCloseWait) until they have closed.
func (s *Service) closeConsoles(ref Ref, cause error) {
	s.consolesMu.Lock()
	var done []chan struct{}
	for _, c := range s.consoles[ref] {
		c.cancel(cause)
		done = append(done, c.done)
	}
	s.consolesMu.Unlock()
	deadline := time.NewTimer(consoleCloseWait)
	defer deadline.Stop()
	for _, d := range done {
		select {
		case <-d:
		case <-deadline.C:
			s.log.Warn("consoles still open after their desktop was released; it is stopped anyway", "desktop", ref)
			return
		}
	}
}
