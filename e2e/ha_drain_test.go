package e2e

import (
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/console"
)

// TestHA_DrainHandsScreensOff: a draining owner hands its screens and its
// shared serial console off as its drain begins, not as it exits
// (haScreen; a drains for up to a minute): erin's console relayed
// through b ends, b passing on why (1012: the screen moves to another
// portal server), opened again on b it shows the screen with b its owner;
// alice's serial console on a ends long before the drain's minute, saying
// why (1012: the console moves), and
// erin's serial console on b, joined over a stream link, follows it to c
// when alice opens it there, without opening anything again: her command
// runs and both read it. The VMI's VNC and serial clients were one at a
// time.
func TestHA_DrainHandsScreensOff(t *testing.T) {
	hs := startHAScreen(t)
	b, c := hs.reps["b"], hs.reps["c"]
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
	serial := func(r *haReplica, user string) *websocket.Conn {
		t.Helper()
		ws, res, err := dialWS(r.p, user, "/ws/serial/"+hs.ns+"/"+hs.member, r.p.URL)
		if err != nil {
			t.Fatalf("%s's serial console on %s: %v (%v)", user, r.name, err, status(res))
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	aliceSerial := serial(a, "alice")
	erinSerial := serial(b, "erin")
	must(t, erinSerial.WriteMessage(websocket.BinaryMessage, []byte("echo be$((2*5))fore\r")))
	if got := readUntil(erinSerial, "be10fore"); !strings.Contains(got, "be10fore") {
		t.Fatalf("erin's serial console on b read %q; want her command's output (be10fore)", got)
	}

	signalled := time.Now()
	must(t, a.p.cmd.Process.Signal(syscall.SIGTERM))
	// The drain's own end would come after the deadline: a console it
	// ended shows a timeout, not the hand-over's close.
	until := signalled.Add(30 * time.Second) // the drain lasts up to a minute
	for _, c := range []struct {
		who, said string
		end       func() error
	}{
		{"erin's screen on b", console.ScreenMoves, func() error { return erin.end(until) }},
		{"alice's serial console on a", console.ConsoleMoves, func() error {
			aliceSerial.SetReadDeadline(until)
			for {
				if _, _, err := aliceSerial.ReadMessage(); err != nil {
					return err
				}
			}
		}},
	} {
		err := c.end()
		var ce *websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.CloseServiceRestart || ce.Text != c.said {
			t.Errorf("%s ended %v after a's SIGTERM with %v; want a's hand-over said as the drain begins: 1012 %q",
				c.who, time.Since(signalled).Round(time.Millisecond), err, c.said)
		}
	}
	hs.reopen(t, b, "erin", time.Minute)
	if owner := screenOwner(t, hs.admin, hs.ns, hs.member); owner != b.identity {
		t.Errorf("after a handed its screen off, the screen Lease names %q; want b (%s), where erin reconnected", owner, b.identity)
	}
	log := a.p.Log()
	for _, line := range []string{"draining: handing the screen over", "draining: handing the shared consoles over"} {
		if i, end := strings.Index(log, line), strings.Index(log, "shutting down"); i < 0 || (end >= 0 && end < i) {
			t.Errorf("a's log has %q at %d, shutting down at %d; want the hand-off before a stops", line, i, end)
		}
	}
	if n := hs.standIn.Consoles(hs.ns, hs.member, "vnc"); n.Opened != 2 || n.Kicked != 0 || n.Refused != 0 {
		t.Errorf("the VMI's VNC console: %+v; want 2 opened one after another (a's, then b's), none kicked or refused", n)
	}

	// Alice's page opens her serial console again, on c (a reconnects
	// nothing while it drains), once a's upstream has gone, as a page's
	// retry would: erin's console on b follows it there by itself.
	waitFor(t, 30*time.Second, "a's serial upstream closed", func() bool { return !hs.standIn.Holding(hs.ns, hs.member, "console") })
	aliceAgain := serial(c, "alice")
	must(t, erinSerial.WriteMessage(websocket.BinaryMessage, []byte("echo fol$((3*4))low\r")))
	readUntilWS(t, aliceAgain, "fol12low", 30*time.Second) // erin's keys, typed on b, ran on c's console
	if got := readUntil(erinSerial, "fol12low"); !strings.Contains(got, "fol12low") {
		t.Errorf("erin's serial console on b read %q after following to c; want her command's output (fol12low)", got)
	}
	if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n.Opened != 2 || n.Kicked != 0 {
		t.Errorf("the VMI's serial console: %+v; want 2 opened one after another (a's, then c's), none kicked", n)
	}
}
