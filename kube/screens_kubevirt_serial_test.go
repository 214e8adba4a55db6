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
	p                vdi.Protocol
	ref              vdi.Ref
	up               upstreams
	alice            holderConsole
	erin, carol      *websocket.Conn
	holder, invitees *replica // where alice's console, and erin's and carol's, are open
	opened           int      // upstreams opened for it so far, one after the other
	step             int      // carol's and alice's commands so far (each prints its own word)
}

// holderConsole is alice's console of a sharedStream: a websocket the
// test drives (holderStream), or her serial console's page in Chromium
// (serialPage).
type holderConsole interface {
	// send types text.
	send(t *testing.T, text string)
	// read returns what the console showed until it shows want, or 30 s.
	read(want string) string
	// again opens the console again on r once it was cut: its replica
	// was killed, or drained (moves: it must have said the console
	// moves).
	again(t *testing.T, what string, r *replica, moves bool)
	// reload closes the console and opens it on r, as a load of the page
	// again does.
	reload(t *testing.T, r *replica)
}

// holderStream is alice's console p of ref as a websocket the test
// drives; she opens it again on a replica once up holds no upstream.
type holderStream struct {
	ws  *websocket.Conn
	p   vdi.Protocol
	ref vdi.Ref
	up  upstreams
}

// openHolderStream opens alice's console p of ref on r.
func openHolderStream(t *testing.T, p vdi.Protocol, ref vdi.Ref, up upstreams, r *replica) *holderStream {
	t.Helper()
	return &holderStream{ws: r.mustStream(t, p, ref, "alice"), p: p, ref: ref, up: up}
}

func (h *holderStream) send(t *testing.T, text string) { send(t, h.ws, text) }

func (h *holderStream) read(want string) string { return readUntil(h.ws, want) }

func (h *holderStream) again(t *testing.T, what string, r *replica, moves bool) {
	t.Helper()
	if ce := closedStream(h.ws); moves && (ce == nil || ce.Code != websocket.CloseServiceRestart || ce.Text != console.ConsoleMoves) {
		t.Errorf("%s: alice's %s console ended with %v; want 1012 %q", what, h.p, ce, console.ConsoleMoves)
	}
	deadline := time.Now().Add(time.Minute)
	for h.up.held() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: the desktop still holds the %s console's upstream a minute later", what, h.p)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.ws = r.mustStream(t, h.p, h.ref, "alice")
}

func (h *holderStream) reload(t *testing.T, r *replica) {
	t.Helper()
	h.ws.Close()
	h.again(t, "alice reloaded her "+string(h.p)+" console", r, false)
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

// shareStream: alice's console p of ref is open on holder (the upstream
// is the desktop's, through the API server); erin (view) and carol
// (control) open it on other, which relays them to alice's. carol's
// command runs and alice's, and all three read their output; erin's
// keys go nowhere; one upstream opened.
func shareStream(t *testing.T, p vdi.Protocol, ref vdi.Ref, up upstreams, alice holderConsole, holder, other *replica) *sharedStream {
	t.Helper()
	s := &sharedStream{p: p, ref: ref, up: up, alice: alice, holder: holder, invitees: other}
	s.erin, s.carol = other.mustStream(t, p, ref, "erin"), other.mustStream(t, p, ref, "carol")
	send(t, s.erin, "echo vi$((2*3))ew\r")
	s.bothType(t, "shared")
	s.opened = 1
	s.up.check(t, s.opened)
	return s
}

// bothType: carol (control) runs a command, then alice (the holder); alice,
// erin and carol read their output, and nothing of erin's (view only),
// whose keys were sent first.
func (s *sharedStream) bothType(t *testing.T, what string) {
	t.Helper()
	for _, typist := range []struct {
		who  string
		send func(string)
	}{{"carol", func(text string) { send(t, s.carol, text) }}, {"alice", func(text string) { s.alice.send(t, text) }}} {
		s.step++
		who, word := typist.who, fmt.Sprintf("%c%dx%d", typist.who[0], s.step, 42)
		command := fmt.Sprintf("echo %c%dx$((6*7))", who[0], s.step)
		typist.send(command + "\r")
		if got := s.alice.read(word); !strings.Contains(got, command) || !strings.Contains(got, word) || strings.Contains(got, "vi6ew") {
			t.Errorf("%s: alice's %s console on %s read %q; want %s's command echoed (%s), its output (%s) and nothing of erin's, view only (vi6ew)", what, s.p, s.holder.name, lastLines(got, 10), who, command, word)
		}
		for reader, ws := range map[string]*websocket.Conn{"erin": s.erin, "carol": s.carol} {
			if got := readUntil(ws, word); !strings.Contains(got, word) || strings.Contains(got, "vi6ew") {
				t.Errorf("%s: %s's %s console on %s read %q; want %s's command's output (%s) and nothing of erin's, view only (vi6ew)", what, reader, s.p, s.invitees.name, got, who, word)
			}
		}
	}
}

// reopen: alice's console, cut, opens again on r (holderConsole.again);
// erin's and carol's, never opened again, follow it there: carol's
// command runs and alice's and all read them; one upstream more.
func (s *sharedStream) reopen(t *testing.T, what string, r *replica) {
	t.Helper()
	s.holderAgain(t, what, r, false)
	s.bothType(t, what)
	s.up.check(t, s.opened)
}

// reload: alice loads her console's page again, which opens on r; erin's
// and carol's follow it there as in reopen.
func (s *sharedStream) reload(t *testing.T, r *replica) {
	t.Helper()
	s.alice.reload(t, r)
	s.holder = r
	s.opened++
	s.bothType(t, "alice reloaded her "+string(s.p)+" console onto "+r.name)
	s.up.check(t, s.opened)
}

// holderAgain: alice's console, cut, opens again on r.
func (s *sharedStream) holderAgain(t *testing.T, what string, r *replica, moves bool) {
	t.Helper()
	s.alice.again(t, what, r, moves)
	s.holder = r
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
		if s.invitees == r {
			for who, ws := range invitees {
				ended(who, ws, false)
			}
		}
		s.holderAgain(t, what, other, true)
		if s.invitees == r {
			s.erin, s.carol, s.invitees = other.mustStream(t, s.p, s.ref, "erin"), other.mustStream(t, s.p, s.ref, "carol"), other
		}
	case r == s.invitees:
		for who, ws := range invitees {
			ended(who, ws, true)
		}
		s.erin, s.carol, s.invitees = other.mustStream(t, s.p, s.ref, "erin"), other.mustStream(t, s.p, s.ref, "carol"), other
	}
	s.bothType(t, what)
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

// busyLine has the guest behind serial console ws take no input for 3 s
// (a command that runs) and types 256 KiB ahead, which wait in the line
// (the guest's tty buffer holds a few KiB): a close sent now reaches
// virt-handler only once the guest has taken them.
func busyLine(t *testing.T, ws *websocket.Conn) {
	t.Helper()
	send(t, ws, "sleep 3; cat >/dev/null\r")
	if got := readUntil(ws, "/dev/null"); !strings.Contains(got, "/dev/null") {
		t.Fatalf("the serial console did not echo the command: %q", got)
	}
	line := strings.Repeat("x", 63) + "\r"
	for range 256 << 10 / (64 * 64) {
		send(t, ws, strings.Repeat(line, 64))
	}
}
