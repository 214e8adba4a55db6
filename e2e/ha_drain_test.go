package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestHA_DrainHandsScreensOff: a draining owner hands its screens off as
// its drain begins, not as it exits (haScreen; a drains for up to a
// minute, kept draining by alice's serial console there): erin's console
// relayed through b ends, opened again on b it shows the screen with b
// its owner while a still drains, and the VMI's VNC clients were one at
// a time.
func TestHA_DrainHandsScreensOff(t *testing.T) {
	hs := startHAScreen(t)
	b := hs.reps["b"]
	old := hs.reps["a"]
	old.p.Stop(t)
	a := startReplica(t, "a", old.data, "127.0.0.1:0", append(old.env, "CORRAL_VDI_DRAIN_TIMEOUT=60s"))
	hs.reps["a"] = a
	if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/"+hs.ns+"/"+hs.member+"/shares", `{"user":"erin","control":true}`, nil); code != 201 && code != 200 {
		t.Fatalf("alice invites erin: %d", code)
	}
	alice := hs.open(t, a, "alice")
	if _, err := alice.screen(t); err != nil {
		t.Fatalf("alice's screen on a: %v", err)
	}
	if owner := screenOwner(t, hs.admin, hs.ns, hs.member); owner != a.identity {
		t.Fatalf("the screen Lease names %q; want a (%s)", owner, a.identity)
	}
	erin := hs.open(t, b, "erin")
	if _, err := erin.screen(t); err != nil {
		t.Fatalf("erin's screen on b: %v", err)
	}
	serial, res, err := dialWS(a.p, "alice", "/ws/serial/"+hs.ns+"/"+hs.member, a.p.URL)
	if err != nil {
		t.Fatalf("alice's serial console on a: %v (%v)", err, status(res))
	}
	t.Cleanup(func() { serial.Close() })

	must(t, a.p.cmd.Process.Signal(syscall.SIGTERM))
	waitFor(t, 30*time.Second, "a draining", func() bool { return strings.Contains(a.p.Log(), "draining:") })
	erin.ws.SetReadDeadline(time.Now().Add(time.Minute))
	for {
		if _, _, err := erin.ws.ReadMessage(); err != nil {
			break // handed off: the console ends, its page reconnects
		}
	}
	hs.reopen(t, b, "erin", time.Minute)
	if owner := screenOwner(t, hs.admin, hs.ns, hs.member); owner != b.identity {
		t.Errorf("after a handed its screen off, the screen Lease names %q; want b (%s), where erin reconnected", owner, b.identity)
	}
	if strings.Contains(a.p.Log(), "shutting down") {
		t.Errorf("a stopped before erin's screen came back on b; want the hand-off while it drains (its serial console is open)")
	}
	if n := hs.standIn.Consoles(hs.ns, hs.member, "vnc"); n.Opened != 2 || n.Kicked != 0 || n.Refused != 0 {
		t.Errorf("the VMI's VNC console: %+v; want 2 opened one after another (a's, then b's), none kicked or refused", n)
	}
}
