package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// carolsPage opens carol's invitation page (/shared/...) of hs's member in
// Chromium, through an nginx that vouches for carol and sends every
// request to r, and waits for its screen: a user's page pinned to one
// replica, as an ingress with affinity would.
func carolsPage(t *testing.T, hs *haScreen, r *haReplica) playwright.Page {
	t.Helper()
	lb := MustStartNginxFor(t, "carol", r.p.URL)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	t.Cleanup(func() {
		if t.Failed() {
			screenshot(t, page, "ha-invitee-failed")
		}
	})
	if _, err := page.Goto(lb.User + "/shared/" + hs.ns + "/" + hs.member); err != nil {
		t.Fatal(err)
	}
	drawn(t, page, "ha-invitee")
	screenshot(t, page, "ha-invitee")
	_, err := page.Evaluate(recordStates)
	must(t, err)
	return page
}

// followSerial: after the replica holding alice's serial console was
// SIGKILLed, her page opens it again on r once the killed replica's
// upstream has gone; erin's console (control) and carol's (view), joined
// over links to the killed replica and never reopened, follow it there:
// erin's command runs and all three read it. The VMI's serial console
// was opened twice, one after the other, never kicked; each replica's
// follow said once that the killed replica does not answer, not at every
// poll while its heartbeat ran out.
func followSerial(t *testing.T, hs *haScreen, r *haReplica, erin, carol *websocket.Conn) {
	t.Helper()
	waitFor(t, 30*time.Second, "the killed replica's serial upstream closed", func() bool {
		return !hs.standIn.Holding(hs.ns, hs.member, "console")
	})
	alice, res, err := dialWS(r.p, "alice", "/ws/serial/"+hs.ns+"/"+hs.member, r.p.URL)
	if err != nil {
		t.Fatalf("alice's serial console on %s again: %v (%v)", r.name, err, status(res))
	}
	t.Cleanup(func() { alice.Close() })
	must(t, erin.WriteMessage(websocket.BinaryMessage, []byte("echo fol$((3*4))lowed\r")))
	readUntilWS(t, alice, "fol12lowed", 30*time.Second)
	for who, ws := range map[string]*websocket.Conn{"erin": erin, "carol": carol} {
		if got := readUntil(ws, "fol12lowed"); !strings.Contains(got, "fol12lowed") {
			t.Errorf("%s's serial console read %q after the kill; want erin's command's output (fol12lowed), followed to %s", who, got, r.name)
		}
	}
	if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n.Opened != 2 || n.Kicked != 0 {
		t.Errorf("the VMI's serial console: %+v; want 2 opened one after another (the killed replica's, then %s's), none kicked", n, r.name)
	}
	for _, name := range []string{"b", "c"} {
		n := strings.Count(hs.reps[name].p.Log(), "the replica holding the shared console does not answer")
		if n > 1 {
			t.Errorf("%s logged %d times that the killed replica does not answer during one follow; want once", name, n)
		}
	}
}

// reconnected waits for page, whose console was cut, to show the screen
// again, and checks that in between it said that the portal server
// holding the screen went away (not the desktop) and that it reconnects,
// by itself (no load of the page again). At laptop, tablet and phone
// sizes its status is whole beside the participants list.
func reconnected(t *testing.T, page playwright.Page, wait time.Duration) {
	t.Helper()
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(float64(wait.Milliseconds()))).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	drawn(t, page, "ha-invitee-after-kill")
	for _, size := range []struct {
		name string
		w, h int
	}{{"laptop", 1280, 800}, {"tablet", 1024, 1366}, {"phone", 390, 844}} {
		must(t, page.SetViewportSize(size.w, size.h))
		screenshot(t, page, "ha-invitee-reconnected-"+size.name)
		v, err := page.Evaluate(`() => { const s = document.getElementById('status'); return s.scrollWidth <= s.clientWidth; }`)
		must(t, err)
		if whole, _ := v.(bool); !whole {
			t.Errorf("carol's page at %dx%d cuts its status (Connected) beside the participants list; want it whole", size.w, size.h)
		}
	}
	said := pageSaid(t, page)
	t.Logf("carol's page said, in turn: %q", said)
	all := strings.Join(said, "\n")
	if !strings.Contains(all, portalWentAway+" Reconnecting in") {
		t.Errorf("carol's page said %q while its screen was cut; want it to say the portal server holding the screen went away (%q) and that it reconnects", said, portalWentAway)
	}
	if strings.Contains(all, "Desktop connection failed") {
		t.Errorf("carol's page said %q; want no word of the desktop failing: a portal replica was killed", said)
	}
}

// saysMoved waits for page, whose screen's owner drains, to say that the
// screen moves to another portal server and that it reconnects, and never
// that the desktop closed the connection.
func saysMoved(t *testing.T, page playwright.Page, wait time.Duration) {
	t.Helper()
	var said []string
	if !eventually(wait, func() bool {
		said = pageSaid(t, page)
		return strings.Contains(strings.Join(said, "\n"), portalMoves+" Reconnecting in")
	}) {
		t.Errorf("carol's page said %q after its screen's owner began to drain; want it to say the screen moves (%q) and that it reconnects", said, portalMoves)
	}
	t.Logf("carol's page said, in turn, as the owner drained: %q", said)
	if all := strings.Join(said, "\n"); strings.Contains(all, "Desktop closed the connection") {
		t.Errorf("carol's page said %q; want no word of the desktop closing: its screen's owner drained", said)
	}
}

// portalWentAway is what a page relayed through another replica says when
// that replica, which held the desktop's screen, is killed.
const portalWentAway = "The portal server holding this desktop's screen went away; another one takes it over."

// portalMoves is what a page says when the replica holding its desktop's
// screen drains (console.ScreenMoves, a sentence).
const portalMoves = "The portal server holding this desktop's screen is shutting down; the screen moves to another one."
