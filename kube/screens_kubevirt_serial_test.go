package kube_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// sharedSerial is alice's serial console of a desktop shared across
// replicas (testKubeVirtOneScreen): hers, and erin's (view) and carol's
// (control), which join it over stream links from another replica.
type sharedSerial struct {
	alice, erin, carol *websocket.Conn
	before             testcluster.ConsoleCounts // virt-handler's serial console before it
}

// shareSerial: alice opens the serial console of ref on holder, through
// virt-api and the node's virt-handler, which takes one serial client
// too; erin (view) and carol (control) open it on other, which relays
// them to alice's. carol's command runs and all three read its output;
// erin's keys go nowhere; virt-handler let one client in, kicked none.
func shareSerial(t *testing.T, holder, other *replica, node *testcluster.Node, ref vdi.Ref) *sharedSerial {
	t.Helper()
	s := &sharedSerial{before: node.Consoles(ref.Namespace, ref.Name, "console")}
	s.alice = holder.mustSerial(t, ref, "alice")
	s.erin, s.carol = other.mustSerial(t, ref, "erin"), other.mustSerial(t, ref, "carol")
	send(t, s.erin, "echo vi$((2*3))ew\r")
	send(t, s.carol, "echo sh$((6*7))ared\r")
	for who, ws := range map[string]*websocket.Conn{"alice on " + holder.name: s.alice, "erin on " + other.name: s.erin, "carol on " + other.name: s.carol} {
		if got := readUntil(ws, "sh42ared"); !strings.Contains(got, "sh42ared") || strings.Contains(got, "vi6ew") {
			t.Errorf("%s's serial console read %q; want carol's command's output (sh42ared) and nothing of erin's, view only (vi6ew)", who, got)
		}
	}
	s.counts(t, node, ref, 1)
	return s
}

// follow: after the replica holding alice's serial console was killed,
// she opens it again on r once virt-handler has seen the killed
// replica's client go; erin's and carol's consoles, never opened again,
// follow it there: carol's command runs and alice reads it. virt-handler
// let one more client in, none kicked.
func (s *sharedSerial) follow(t *testing.T, r *replica, node *testcluster.Node, ref vdi.Ref) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for node.Holding(ref.Namespace, ref.Name, "console") {
		if time.Now().After(deadline) {
			t.Fatal("virt-handler still holds the killed replica's serial client after a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	s.alice = r.mustSerial(t, ref, "alice")
	send(t, s.carol, "echo fol$((3*4))lowed\r")
	for who, ws := range map[string]*websocket.Conn{"alice on " + r.name: s.alice, "carol": s.carol, "erin": s.erin} {
		if got := readUntil(ws, "fol12lowed"); !strings.Contains(got, "fol12lowed") {
			t.Errorf("%s's serial console read %q after the kill; want carol's command's output (fol12lowed), followed to %s", who, got, r.name)
		}
	}
	s.counts(t, node, ref, 2)
}

// counts checks that virt-handler let want serial clients in since
// shareSerial, one after the other, and kicked none.
func (s *sharedSerial) counts(t *testing.T, node *testcluster.Node, ref vdi.Ref, want int) {
	t.Helper()
	n := node.Consoles(ref.Namespace, ref.Name, "console")
	if n.Opened-s.before.Opened != want || n.Kicked != s.before.Kicked {
		t.Errorf("virt-handler's serial console of the VMI: %+v (before: %+v); want %d more opened, none kicked", n, s.before, want)
	}
	t.Logf("virt-handler's serial console: %+v (before the shared one: %+v)", n, s.before)
}

// mustSerial waits up to a minute for user's serial console of ref on r
// to open (an invitee's is refused until the holder's is open).
func (r *replica) mustSerial(t *testing.T, ref vdi.Ref, user string) *websocket.Conn {
	t.Helper()
	var err error
	for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		var ws *websocket.Conn
		if ws, err = r.dial("/ws/serial/"+ref.Namespace+"/"+ref.Name, user); err == nil {
			t.Cleanup(func() { ws.Close() })
			return ws
		}
	}
	t.Fatalf("%s's serial console of %s on replica %s: %v", user, ref, r.name, err)
	return nil
}

// send types text on a serial console.
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
