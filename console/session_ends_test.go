package console

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// running is a session Run runs in the background until its pipe's
// context ends.
type running struct {
	opened chan struct{}
	done   chan struct{}
	pipe   context.Context // the pipe's
	cause  error           // why the pipe's context ended
	close  context.CancelFunc
}

func runSession(s *Sessions, c Session) *running {
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{opened: make(chan struct{}), done: make(chan struct{}), close: cancel}
	go func() {
		defer close(r.done)
		s.Run(ctx, c, func(ctx context.Context, _ relay.Options) (relay.Stats, error) {
			r.pipe = ctx
			close(r.opened)
			<-ctx.Done()
			r.cause = context.Cause(ctx)
			return relay.Stats{}, nil
		})
	}()
	<-r.opened
	return r
}

// ended waits for r's end and returns its cause; nil if it runs on.
func (r *running) ended(t *testing.T) error {
	t.Helper()
	select {
	case <-r.done:
		return r.cause
	case <-time.After(30 * time.Second):
		t.Fatal("the session did not end")
		return nil
	}
}

// TestSessionsRun_Ends: what Run keeps besides the relay. The holder's
// newer VNC console ends the older one, not an admin's beside it, and a
// screen window it opens ends neither; the
// holder's console path is the desktop's, a watcher's is not; an
// invitee's console is listed for the holder and ends with its
// invitation; an admin's granted control ends when the holder takes it
// back, with the words the admin's page reopens on.
func TestSessionsRun_Ends(t *testing.T) {
	share := vdi.Share{ID: "sh1", User: "bob", By: "alice", Expires: time.Now().Add(time.Hour)}
	claims := &claimStub{holder: "alice", share: &share}
	s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})
	alice := vdi.Identity{Login: "alice"}
	holder := func(id string) Session {
		return Session{ID: id, User: alice, Ref: heldRef, Protocol: vdi.ProtocolVNC, Path: PathDirect, Holder: "alice"}
	}

	first := runSession(s, holder("s1"))
	if got := s.Path(heldRef); got != PathDirect {
		t.Errorf("the holder's console path: %q; want %q", got, PathDirect)
	}
	admin := Session{ID: "s2", User: vdi.Identity{Login: "ops", Admin: true}, Ref: heldRef, Protocol: vdi.ProtocolVNC, Path: PathPeer, Holder: "alice",
		Watcher: &api.Viewer{User: "ops", Role: "watch", Protocol: vdi.ProtocolVNC}}
	watching := runSession(s, admin)
	if got := s.Path(heldRef); got != PathDirect {
		t.Errorf("with an admin watching, the console path: %q; want the holder's, %q", got, PathDirect)
	}
	second := runSession(s, holder("s3"))
	if cause := first.ended(t); cause != ErrTakenOver {
		t.Errorf("the holder's older console ended with %v; want %v", cause, ErrTakenOver)
	}
	window := holder("s3-2") // a screen window the holder's console opened
	window.Screen = 2
	w := runSession(s, window)
	defer w.close()

	invitee := runSession(s, Session{ID: "s4", User: vdi.Identity{Login: "bob"}, Ref: heldRef, Protocol: vdi.ProtocolVNC, Path: PathDirect, Holder: "alice",
		Share: &share, Watcher: &api.Viewer{User: "bob", Role: "watch", Protocol: vdi.ProtocolVNC}})
	granted := runSession(s, Session{ID: "s5", User: vdi.Identity{Login: "helper", Admin: true}, Ref: heldRef, Protocol: vdi.ProtocolVNC, Path: PathDirect, Holder: "alice",
		Watcher: &api.Viewer{User: "helper", Role: "control", Protocol: vdi.ProtocolVNC}, Granted: true})
	list, _, _ := s.Watchers().Snapshot(heldRef)
	var users []string
	var grantID string
	for _, v := range list {
		users = append(users, v.User)
		if v.Granted {
			grantID = v.ID
		}
	}
	if len(users) != 3 || users[0] != "ops" || users[1] != "bob" || users[2] != "helper" {
		t.Errorf("watchers listed: %v; want [ops bob helper]", users)
	}
	s.Invitees().End("sh1", ShareEnded("alice stopped sharing this desktop."))
	if cause := invitee.ended(t); cause == nil || cause.Error() != "alice stopped sharing this desktop." {
		t.Errorf("the invitee's console ended with %v; want the revocation's words", cause)
	}
	if !s.Watchers().End(heldRef, grantID) {
		t.Fatal("the holder found no console of granted control to end")
	}
	if cause := granted.ended(t); cause == nil || cause.Error() != RoleChangedPrefix+"alice took back control; you watch, view only." {
		t.Errorf("the granted console ended with %v; want the role changed back", cause)
	}

	if err := context.Cause(watching.pipe); err != nil {
		t.Errorf("the admin's console beside the holder's ended (%v); want it running", err)
	}
	if err := context.Cause(second.pipe); err != nil {
		t.Errorf("the holder's newest console ended (%v); want it running", err)
	}
	list, _, _ = s.Watchers().Snapshot(heldRef)
	if len(list) != 1 || list[0].User != "ops" {
		t.Errorf("watchers after two left: %v; want ops alone", list)
	}
	second.close() // its client left
	second.ended(t)
	if got := s.Path(heldRef); got != "" {
		t.Errorf("the console path after the holder's consoles closed: %q; want none", got)
	}
}
