package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// adminSerialGivesWay: ops (an admin) opens the serial console of the
// member on c while nobody holds it (alice released it, ops started it);
// then ops assigns it to alice and she opens her serial console on a.
// Ops's console ends saying alice claimed it and that ops watches now,
// view only; hers opens and her command runs; ops's opened again on c
// reads her output. The VMI's serial console sees one client after the
// other, none kicked (before, ops's was dialed with no record and
// virt-handler kicked it when hers dialed).
func adminSerialGivesWay(t *testing.T, hs *haScreen, a, c *haReplica) {
	t.Helper()
	desk := "/api/vdi/desktops/" + hs.ns + "/" + hs.member
	if code := a.p.API(t, "alice", "POST", desk+"/release", nil); code != 200 && code != 204 {
		t.Fatalf("alice releases the member: %d", code)
	}
	waitFor(t, 60*time.Second, "ops starting the member nobody holds", func() bool {
		var d desktop
		code := c.p.API(t, "ops", "POST", desk+"/start", &d)
		if code != 200 {
			return false
		}
		code = c.p.API(t, "ops", "GET", desk, &d)
		return code == 200 && d.Power == "running" && d.Holder == ""
	})
	serial := "/ws/serial/" + hs.ns + "/" + hs.member
	open := func(r *haReplica, user string) *websocket.Conn {
		t.Helper()
		var ws *websocket.Conn
		waitFor(t, 30*time.Second, user+"'s serial console on "+r.name, func() bool {
			w, _, err := dialWS(r.p, user, serial, r.p.URL)
			ws = w
			return err == nil
		})
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	before := hs.standIn.Consoles(hs.ns, hs.member, "console")
	ops := open(c, "ops")
	must(t, ops.WriteMessage(websocket.BinaryMessage, []byte("echo op$((1+1))s\r")))
	if got := readUntil(ops, "op2s"); !strings.Contains(got, "op2s") {
		t.Fatalf("ops's own serial console read %q; want his command's output", got)
	}

	if code := c.p.APIBody(t, "ops", "POST", desk+"/assign", `{"user":"alice"}`, nil); code != 200 {
		t.Fatalf("ops assigns the member to alice: %d", code)
	}
	alice := open(a, "alice")
	ops.SetReadDeadline(time.Now().Add(15 * time.Second))
	var why string
	for {
		if _, _, err := ops.ReadMessage(); err != nil {
			if ce, ok := err.(*websocket.CloseError); ok {
				why = ce.Text
			}
			break
		}
	}
	if want := "Role changed: alice claimed this desktop and opened its serial console"; !strings.HasPrefix(why, want) {
		t.Errorf("ops's own serial console ended with %q; want %q…", why, want)
	}
	must(t, alice.WriteMessage(websocket.BinaryMessage, []byte("echo al$((2+3))ice\r")))
	opsAgain := open(c, "ops")
	if got := readUntil(alice, "al5ice"); !strings.Contains(got, "al5ice") {
		t.Fatalf("alice's serial console read %q; want her command's output", got)
	}
	must(t, alice.WriteMessage(websocket.BinaryMessage, []byte("echo wat$((3*3))ch\r")))
	if got := readUntil(opsAgain, "wat9ch"); !strings.Contains(got, "wat9ch") {
		t.Errorf("ops's serial console opened again beside alice read %q; want her command's output", got)
	}
	if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n.Opened != before.Opened+2 || n.Kicked != before.Kicked {
		t.Errorf("the VMI's serial console: %+v, before %+v; want 2 more opened (ops's, then alice's), none kicked", n, before)
	}
}
