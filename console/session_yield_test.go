package console

import (
	"context"
	"log/slog"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestSessions_AdminSerialGivesWay: an admin's own serial console of a
// desktop nobody held ends, saying who came and that the admin watches
// now, when a holder opens its serial console: at once on the same
// replica (TakeOver), and on another replica when the claim names the
// holder's newest serial console.
func TestSessions_AdminSerialGivesWay(t *testing.T) {
	ops := vdi.Identity{Login: "ops", Admin: true}
	own := Session{ID: "s1", User: ops, Ref: heldRef, Protocol: vdi.ProtocolSerial, Path: PathDirect}
	want := HolderCame("alice")

	t.Run("same replica", func(t *testing.T) {
		claims := &claimStub{holder: "alice"}
		s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})
		admin := runSession(s, own)
		alice := Session{ID: "s2", User: vdi.Identity{Login: "alice"}, Ref: heldRef, Protocol: vdi.ProtocolSerial, Holder: "alice"}
		_, leave := s.TakeOver(context.Background(), &alice)
		defer leave()
		if cause := admin.ended(t); cause != want {
			t.Errorf("the admin's own serial console ended with %v; want %q", cause, want)
		}
	})

	// The holder's comes while the admin's dials (between TakeOver and
	// Run), on one replica whose claim store reports no changes: his
	// ends all the same, before it holds the line.
	t.Run("while it dials", func(t *testing.T) {
		claims := &claimStub{}
		s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})
		admin := own
		dialing, leave := s.TakeOver(context.Background(), &admin)
		defer leave()
		claims.mu.Lock()
		claims.holder, claims.newest = "alice", "1"
		claims.mu.Unlock()
		alice := Session{ID: "s2", User: vdi.Identity{Login: "alice"}, Ref: heldRef, Protocol: vdi.ProtocolSerial, Holder: "alice"}
		_, leaveAlice := s.TakeOver(context.Background(), &alice)
		defer leaveAlice()
		if cause := context.Cause(dialing); cause != want {
			t.Errorf("the admin's own serial console, dialing, ended with %v; want %q", cause, want)
		}
	})

	t.Run("another replica", func(t *testing.T) {
		claims := &claimStub{changed: make(chan struct{})}
		s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})
		admin := runSession(s, own)
		claims.mu.Lock()
		claims.holder, claims.newest = "alice", "1" // alice claimed it and opened serial elsewhere
		close(claims.changed)
		claims.changed = make(chan struct{})
		claims.mu.Unlock()
		if cause := admin.ended(t); cause != want {
			t.Errorf("the admin's own serial console ended with %v; want %q", cause, want)
		}
	})
}
