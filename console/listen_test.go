package console

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// listening is a Listen running in the background until its play's
// context ends.
type listening struct {
	opened, done chan struct{}
	cause        error
}

func listen(s *Sessions, c Session) *listening {
	l := &listening{opened: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		s.Listen(context.Background(), c, func(ctx context.Context) {
			close(l.opened)
			<-ctx.Done()
			l.cause = context.Cause(ctx)
		})
	}()
	<-l.opened
	return l
}

func (l *listening) ended(t *testing.T) error {
	t.Helper()
	select {
	case <-l.done:
		return l.cause
	case <-time.After(30 * time.Second):
		t.Fatal("the listening did not end")
		return nil
	}
}

// TestSessionsListen: a desktop's sound on this replica. Four listeners
// of one desktop, not a fifth, until one leaves; the holder's sound sets
// no console path and ends when the desktop is released; an invitee's
// is listed for the holder and ends with the invitation (before it was
// Sessions', the invitee's sound played on after a revocation).
func TestSessionsListen(t *testing.T) {
	share := vdi.Share{ID: "sh1", User: "bob", By: "alice", Expires: time.Now().Add(time.Hour)}
	claims := &claimStub{holder: "alice", share: &share}
	s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})

	var releases []func()
	for i := range maxListeners {
		release, err := s.Listener(heldRef)
		if err != nil {
			t.Fatalf("listener %d: %v; want counted", i+1, err)
		}
		releases = append(releases, release)
	}
	if _, err := s.Listener(heldRef); !errors.Is(err, ErrListenersFull) {
		t.Errorf("listener %d: %v; want %v", maxListeners+1, err, ErrListenersFull)
	}
	if release, err := s.Listener(vdi.Ref{Namespace: "ns", Name: "other"}); err != nil {
		t.Errorf("another desktop's first listener: %v; want counted", err)
	} else {
		release()
	}
	releases[0]()
	releases[0]() // twice counts once
	if _, err := s.Listener(heldRef); err != nil {
		t.Errorf("a listener once one left: %v; want counted", err)
	}
	if _, err := s.Listener(heldRef); !errors.Is(err, ErrListenersFull) {
		t.Errorf("one more: %v; want %v (a release twice frees one place)", err, ErrListenersFull)
	}

	holder := listen(s, Session{ID: "a1", User: vdi.Identity{Login: "alice"}, Ref: heldRef, Protocol: vdi.ProtocolAudio, Holder: "alice"})
	if got := s.Path(heldRef); got != "" {
		t.Errorf("the console path with the holder's sound on: %q; want none (sound is no console)", got)
	}
	claims.mu.Lock()
	release := claims.end // a release ends the holder's consoles (vdi.Service.TrackConsole)
	claims.mu.Unlock()
	invitee := listen(s, Session{ID: "b1", User: vdi.Identity{Login: "bob"}, Ref: heldRef, Protocol: vdi.ProtocolAudio, Holder: "alice",
		Share: &share, Watcher: &api.Viewer{User: "bob", Role: "listen", Protocol: vdi.ProtocolAudio}})
	if list, _, _ := s.Watchers().Snapshot(heldRef); len(list) != 1 || list[0].User != "bob" || list[0].Role != "listen" {
		t.Errorf("watchers: %+v; want bob listening", list)
	}
	s.Invitees().End("sh1", ShareEnded("alice stopped sharing this desktop."))
	if cause := invitee.ended(t); cause == nil || cause.Error() != "alice stopped sharing this desktop." {
		t.Errorf("the invitee's sound ended with %v; want the revocation's words", cause)
	}
	if list, _, _ := s.Watchers().Snapshot(heldRef); len(list) != 0 {
		t.Errorf("watchers once bob's sound ended: %+v; want none", list)
	}
	release(errors.New("released"))
	if cause := holder.ended(t); cause == nil || cause.Error() != "released" {
		t.Errorf("the holder's sound ended with %v; want the release", cause)
	}
}
