package kube_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// sharedStream is alice's serial console or terminal of a desktop shared
// across replicas (testKubeVirtOneScreen): hers, and erin's (view) and
// carol's (control), which join it over stream links from another
// replica. upstreams says how it reaches the desktop: the node stand-in
// counts those.
type sharedStream struct {
	p                  vdi.Protocol
	ref                vdi.Ref
	up                 upstreams
	alice, erin, carol *websocket.Conn
	holder, invitees   *replica // where alice's console, and erin's and carol's, are open
	opened             int      // upstreams opened for it so far, one after the other
	step               int      // carol's commands so far (each prints its own word)
}

// upstreams are a desktop's connections of one console, as the node
// stand-in counts them.
type upstreams interface {
	// check fails t unless want were opened since the stream was shared,
	// one after the other, none kicked.
	check(t *testing.T, want int)
	// held reports whether one is open now.
	held() bool
}

// serialUpstreams are a VMI's serial clients on its node's virt-handler,
// which takes one (a new one kicks the old).
type serialUpstreams struct {
	node   *testcluster.Node
	ref    vdi.Ref
	before testcluster.ConsoleCounts
}

func newSerialUpstreams(node *testcluster.Node, ref vdi.Ref) *serialUpstreams {
	return &serialUpstreams{node: node, ref: ref, before: node.Consoles(ref.Namespace, ref.Name, "console")}
}

func (u *serialUpstreams) check(t *testing.T, want int) {
	t.Helper()
	n := u.node.Consoles(u.ref.Namespace, u.ref.Name, "console")
	if n.Opened-u.before.Opened != want || n.Kicked != u.before.Kicked {
		t.Errorf("virt-handler's serial console of the VMI: %+v (before: %+v); want %d more opened, none kicked", n, u.before, want)
	}
	t.Logf("virt-handler's serial console: %+v (before the shared one: %+v)", n, u.before)
}

func (u *serialUpstreams) held() bool { return u.node.Holding(u.ref.Namespace, u.ref.Name, "console") }

// shareStream: alice opens console p of ref on holder (the upstream is
// the desktop's, through the API server); erin (view) and carol
// (control) open it on other, which relays them to alice's. carol's
// command runs and all three read its output; erin's keys go nowhere;
// one upstream opened.
func shareStream(t *testing.T, p vdi.Protocol, ref vdi.Ref, up upstreams, holder, other *replica) *sharedStream {
	t.Helper()
	s := &sharedStream{p: p, ref: ref, up: up, holder: holder, invitees: other}
	s.alice = holder.mustStream(t, p, ref, "alice")
	s.erin, s.carol = other.mustStream(t, p, ref, "erin"), other.mustStream(t, p, ref, "carol")
	send(t, s.erin, "echo vi$((2*3))ew\r")
	s.carolTypes(t, "shared")
	s.opened = 1
	s.up.check(t, s.opened)
	return s
}

// carolTypes: carol (control) runs a command; alice, erin and carol read
// its output, and nothing of erin's (view only), whose keys were sent
// first.
func (s *sharedStream) carolTypes(t *testing.T, what string) {
	t.Helper()
	s.step++
	word := fmt.Sprintf("c%dx%d", s.step, 42)
	send(t, s.carol, fmt.Sprintf("echo c%dx$((6*7))\r", s.step))
	for who, ws := range map[string]*websocket.Conn{"alice on " + s.holder.name: s.alice, "erin on " + s.invitees.name: s.erin, "carol on " + s.invitees.name: s.carol} {
		if got := readUntil(ws, word); !strings.Contains(got, word) || strings.Contains(got, "vi6ew") {
			t.Errorf("%s: %s's %s console read %q; want carol's command's output (%s) and nothing of erin's, view only (vi6ew)", what, who, s.p, got, word)
		}
	}
}

// reopen: alice opens her console again on r once the desktop's
// upstream is gone; erin's and carol's, never opened again, follow it
// there: carol's command runs and all read it; one upstream more.
func (s *sharedStream) reopen(t *testing.T, what string, r *replica) {
	t.Helper()
	s.holderAgain(t, what, r)
	s.carolTypes(t, what)
	s.up.check(t, s.opened)
}

// holderAgain opens alice's console on r once the desktop's upstream is
// gone.
func (s *sharedStream) holderAgain(t *testing.T, what string, r *replica) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for s.up.held() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the desktop still holds the %s console's upstream from %s a minute later", what, s.p, s.holder.name)
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.alice, s.holder = r.mustStream(t, s.p, s.ref, "alice"), r
	s.opened++
}

// drained: replica r drained (SIGTERM) and other did not. Holding
// alice's console, r ended it with 1012 and the words that it moves,
// and she opens it again on other; erin's and carol's follow it there
// from another replica, or, joined on r itself, ended with hers and open
// again on other. Relaying erin's and carol's only, r ended theirs as a
// drop and they open them again on other. Either way carol's command
// runs and all read it, and no upstream opened but alice's.
func (s *sharedStream) drained(t *testing.T, r, other *replica) {
	t.Helper()
	what := r.name + " drained"
	ended := func(who string, ws *websocket.Conn, drop bool) {
		t.Helper()
		ce := closedStream(ws)
		switch {
		case ce != nil && ce.Code == websocket.CloseServiceRestart && ce.Text == console.ConsoleMoves:
		case drop && ce != nil && ce.Code == websocket.CloseGoingAway && ce.Text == "session ended": // a drop to the page too
		default:
			t.Errorf("%s: %s's %s console on %s ended with %v; want 1012 %q", what, who, s.p, r.name, ce, console.ConsoleMoves)
		}
	}
	invitees := map[string]*websocket.Conn{"erin": s.erin, "carol": s.carol}
	switch {
	case r == s.holder:
		ended("alice", s.alice, false)
		if s.invitees == r {
			for who, ws := range invitees {
				ended(who, ws, false)
			}
		}
		s.holderAgain(t, what, other)
		if s.invitees == r {
			s.erin, s.carol, s.invitees = other.mustStream(t, s.p, s.ref, "erin"), other.mustStream(t, s.p, s.ref, "carol"), other
		}
	case r == s.invitees:
		for who, ws := range invitees {
			ended(who, ws, true)
		}
		s.erin, s.carol, s.invitees = other.mustStream(t, s.p, s.ref, "erin"), other.mustStream(t, s.p, s.ref, "carol"), other
	}
	s.carolTypes(t, what)
	s.up.check(t, s.opened)
}

// closedStream reads ws until it ends (30 s at most) and returns the
// close frame it got (nil for none).
func closedStream(ws *websocket.Conn) *websocket.CloseError {
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if errors.As(err, &ce) {
				return ce
			}
			return nil
		}
	}
}

// mustStream waits up to a minute for user's console p (serial or
// terminal) of ref on r to open (an invitee's is refused until the
// holder's is open).
func (r *replica) mustStream(t *testing.T, p vdi.Protocol, ref vdi.Ref, user string) *websocket.Conn {
	t.Helper()
	var err error
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		var ws *websocket.Conn
		if ws, err = r.dial("/ws/"+string(p)+"/"+ref.Namespace+"/"+ref.Name, user); err == nil {
			t.Cleanup(func() { ws.Close() })
			return ws
		}
	}
	t.Fatalf("%s's %s console of %s on replica %s: %v", user, p, ref, r.name, err)
	return nil
}

// send types text on a serial console or terminal.
func send(t *testing.T, ws *websocket.Conn, text string) {
	t.Helper()
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte(text)); err != nil {
		t.Fatal(err)
	}
}

// readUntil reads a serial console until its text has want or 30 s have
// passed, and returns what it read.
func readUntil(ws *websocket.Conn, want string) string {
	var got []byte
	ws.SetReadDeadline(time.Now().Add(30 * time.Second))
	defer ws.SetReadDeadline(time.Time{})
	for !strings.Contains(string(got), want) {
		_, b, err := ws.ReadMessage()
		if err != nil {
			break
		}
		got = append(got, b...)
	}
	return string(got)
}
