package console

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// claimStub is a claim that counts what a console's lifecycle records
// on it; end is the last tracked console's (a release ends it).
type claimStub struct {
	mu                               sync.Mutex
	holder                           string
	share                            *vdi.Share // bob's invitation; nil: nobody is invited
	agentStopped                     string     // who stopped the agent at work in it
	newest                           string     // the holder's newest console's stamp
	reads                            int        // of the desktop
	changed                          chan struct{}
	opened, closed, beats, untracked int
	input                            time.Time
	end                              context.CancelCauseFunc
	closedSession, closeReason       string
	sessionInput                     time.Time
}

func (c *claimStub) Desktop(_ context.Context, _ vdi.Identity, _ vdi.Ref) (vdi.Desktop, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reads++
	return vdi.Desktop{Holder: c.holder, AgentStopped: c.agentStopped}, nil
}

func (c *claimStub) TrackConsole(_ vdi.Ref, cancel context.CancelCauseFunc) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.end = cancel
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.untracked++
	}
}

// The holder's newest console and invitations; ClaimChanged is never
// ready unless the test has another replica write the claim (changed).
func (c *claimStub) TakeConsole(context.Context, vdi.Ref, vdi.Protocol, string) (string, error) {
	return "", nil
}
func (c *claimStub) NewestConsole(context.Context, vdi.Ref, vdi.Protocol) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newest, nil
}
func (c *claimStub) ClaimChanged(vdi.Ref) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// stopAgent has by stop the agent, as another replica would: the change
// is reported on the channel ClaimChanged returned.
func (c *claimStub) stopAgent(by string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.agentStopped = by
	close(c.changed)
	c.changed = make(chan struct{})
}
func (c *claimStub) SharedDesktop(context.Context, vdi.Identity, vdi.Ref) (vdi.Desktop, vdi.Share, error) {
	if c.share == nil {
		return vdi.Desktop{}, vdi.Share{}, vdi.Errorf(vdi.EForbidden, "", "not invited")
	}
	return vdi.Desktop{Holder: c.holder}, *c.share, nil
}

func (c *claimStub) ConsoleOpened(context.Context, vdi.Ref) error { return c.count(&c.opened) }
func (c *claimStub) ConsoleClosed(context.Context, vdi.Ref) error { return c.count(&c.closed) }
func (c *claimStub) ConsoleHeartbeat(context.Context, vdi.Ref) error {
	return c.count(&c.beats)
}

func (c *claimStub) Input(_ context.Context, _ vdi.Ref, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.input = at
	return nil
}

func (c *claimStub) count(n *int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n++
	return nil
}

// OpenSession and CloseSession make claimStub the history too.
func (c *claimStub) OpenSession(context.Context, vdi.Session) error { return nil }
func (c *claimStub) CloseSession(_ context.Context, id string, _, _ int64, reason string, lastInput time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closedSession, c.closeReason, c.sessionInput = id, reason, lastInput
	return nil
}

// counts returns opened, beats and closed.
func (c *claimStub) counts() (opened, beats, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.beats, c.closed
}

// release ends the tracked console, as a release of its desktop does.
func (c *claimStub) release(cause error) {
	c.mu.Lock()
	end := c.end
	c.mu.Unlock()
	end(cause)
}

// eventually reports whether ok, asked every few milliseconds, is true
// within d.
func eventually(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}

// setHeartbeatEvery sets how often held consoles beat, for a test's life.
func setHeartbeatEvery(d time.Duration) (restore func()) {
	old := heartbeatEvery
	heartbeatEvery = d
	return func() { heartbeatEvery = old }
}

var heldRef = vdi.Ref{Namespace: "ns", Name: "vm-1"}

// TestHoldAgent: an agent's screen is a console of its claim from the
// start, listed among the desktop's viewers, confirmed by heartbeats
// beyond the request that opened it, recorded closed once when it
// closes; a release closes it, and so does a stop of the agent made on
// another replica (the claim changes), not the claim's other changes.
func TestHoldAgent(t *testing.T) {
	defer setHeartbeatEvery(10 * time.Millisecond)()
	agent := vdi.Identity{Login: "alice", Token: &vdi.TokenScope{ID: "t1", Name: "runner"}}
	for _, end := range []string{"close", "release", "stop"} {
		claims := &claimStub{holder: "alice", changed: make(chan struct{})}
		s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})
		ctx, cancel := context.WithCancel(context.Background())
		near, far := net.Pipe()
		conn := s.HoldAgent(ctx, agent, heldRef, near)
		cancel() // the call that joined the screen ends; the screen stays
		if opened, _, closed := claims.counts(); opened != 1 || closed != 0 {
			t.Fatalf("held screen: opened %d, closed %d; want 1, 0", opened, closed)
		}
		if list, _, _ := s.Watchers().Snapshot(heldRef); len(list) != 1 || list[0].User != "bot:alice/runner" || list[0].Role != RoleAgent {
			t.Errorf("viewers while the agent's screen is open: %+v; want bot:alice/runner, agent", list)
		}
		if !eventually(30*time.Second, func() bool { _, beats, _ := claims.counts(); return beats >= 2 }) {
			t.Fatal("no heartbeats of an open agent's screen")
		}
		claims.mu.Lock()
		read := claims.reads
		close(claims.changed) // a change that leaves the agent at work
		claims.changed = make(chan struct{})
		claims.mu.Unlock()
		if !eventually(30*time.Second, func() bool { claims.mu.Lock(); defer claims.mu.Unlock(); return claims.reads > read }) {
			t.Fatal("the claim's change was not read")
		}
		time.Sleep(50 * time.Millisecond)
		far.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
		if _, err := far.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("after a change that leaves the agent at work, the screen reads %v; want it open", err)
		}
		switch end {
		case "release":
			claims.release(errors.New("released"))
		case "stop":
			claims.stopAgent("alice")
		}
		if end != "close" {
			far.SetReadDeadline(time.Now().Add(30 * time.Second))
			if _, err := far.Read(make([]byte, 1)); err != io.EOF {
				t.Fatalf("after a %s the screen reads %v; want it closed (EOF)", end, err)
			}
		}
		conn.Close()
		conn.Close()
		_, beats, closed := claims.counts()
		if closed != 1 || claims.untracked != 1 {
			t.Errorf("closed screen (%s): recorded closed %d times, untracked %d; want once each", end, closed, claims.untracked)
		}
		if list, _, _ := s.Watchers().Snapshot(heldRef); len(list) != 0 {
			t.Errorf("viewers after the agent's screen closed (%s): %+v; want none", end, list)
		}
		time.Sleep(50 * time.Millisecond)
		if _, after, _ := claims.counts(); after != beats {
			t.Errorf("heartbeats went on after the screen closed: %d, then %d", beats, after)
		}
	}
}

// TestSessionsRun_HolderHeld: the holder's session is held open on the
// claim and its last input reaches the claim and the history; an
// admin's beside it is tracked (a release ends it, with the reason)
// but never counted on the claim.
func TestSessionsRun_HolderHeld(t *testing.T) {
	for _, user := range []string{"alice", "ops"} {
		claims := &claimStub{holder: "alice"}
		s := NewSessions(SessionsConfig{Claims: claims, History: claims, Log: slog.New(slog.DiscardHandler)})
		typed := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Run(context.Background(), Session{ID: "s1", User: vdi.Identity{Login: user}, Ref: heldRef, Protocol: vdi.ProtocolTerminal, Path: PathDirect, Holder: "alice"}, func(ctx context.Context, opts relay.Options) (relay.Stats, error) {
				opts.OnInput([]byte("x"))
				close(typed)
				<-ctx.Done()
				return relay.Stats{}, nil
			})
		}()
		<-typed
		claims.release(errors.New("alice released the desktop"))
		<-done
		opened, _, closed := claims.counts()
		holder := user == "alice"
		if want := map[bool]int{true: 1, false: 0}[holder]; opened != want || closed != want {
			t.Errorf("%s's session: recorded opened %d, closed %d; want %d each", user, opened, closed, want)
		}
		if got := !claims.input.IsZero(); got != holder {
			t.Errorf("%s's input reached the claim: %v; want %v", user, got, holder)
		}
		if claims.closedSession != "s1" || claims.closeReason != "alice released the desktop" || claims.sessionInput.IsZero() {
			t.Errorf("history: session %q closed with %q, last input %v; want s1, the release's reason, the input", claims.closedSession, claims.closeReason, claims.sessionInput)
		}
	}
}
