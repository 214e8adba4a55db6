package console

import (
	"context"
	"errors"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A desktop's sound (/ws/audio) is no console of its own: it keeps no
// history row and does not hold the claim, but it ends as a console
// does (a release or reclaim, an invitee's invitation ending, on any
// replica) and anyone but the holder listening is listed for the
// holder's page, as a watcher is.

// maxListeners bounds the listeners of one desktop on this replica: each
// runs an encoder inside the desktop.
const maxListeners = 4

// ErrListenersFull refuses one more listener of a desktop whose sound
// already plays maxListeners times on this replica.
var ErrListenersFull = errors.New("console: this desktop's sound already plays in several tabs")

// listeners counts each desktop's listeners on this replica. The zero
// value is ready.
type listeners struct {
	mu sync.Mutex
	n  map[vdi.Ref]int
}

// Listener counts one more listener of ref's sound, before its socket
// is upgraded, and returns the func that uncounts it; past the cap it
// returns ErrListenersFull.
func (s *Sessions) Listener(ref vdi.Ref) (release func(), err error) {
	l := &s.listeners
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.n == nil {
		l.n = map[vdi.Ref]int{}
	}
	if l.n[ref] >= maxListeners {
		return nil, ErrListenersFull
	}
	l.n[ref]++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.n[ref]--; l.n[ref] <= 0 {
				delete(l.n, ref)
			}
		})
	}, nil
}

// Listen runs play, listener c's sound of c.Ref (c.Protocol is
// vdi.ProtocolAudio), until play returns; the context play gets ends
// when the desktop is released or reclaimed, and, for an invitee, when
// the invitation ends on any replica. c.Watcher lists anyone but the
// holder meanwhile.
func (s *Sessions) Listen(ctx context.Context, c Session, play func(ctx context.Context)) {
	ctx, leave := s.enter(ctx, c)
	defer leave()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	untrack := s.cfg.Claims.TrackConsole(c.Ref, cancel)
	defer untrack()
	play(ctx)
}
