package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// adminSerialGivesWay: ops (an admin) opens the serial console of the
// member on c in his page while nobody holds it (alice released it, ops
// started it); then ops assigns it to alice and she opens her serial
// console on a. Ops's console ends saying alice claimed it and that ops
// watches now, view only; hers opens and her command runs; ops's page
// loads again by itself beside hers and shows her output. The VMI's serial console sees one client after the
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
	ops := adminSerialPage(t, hs, c, "ops")
	must(t, ops.Locator("#screen .xterm").Click())
	must(t, ops.Keyboard().Type("echo op$((1+1))s\n"))
	waitXterm(t, ops, regexp.MustCompile(`op2s`), 20*time.Second)
	secondAdminWatches(t, hs, a, ops)

	_, err := ops.Evaluate(`() => { window.notLoadedAgain = true; }`)
	must(t, err)
	if code := c.p.APIBody(t, "ops", "POST", desk+"/assign", `{"user":"alice"}`, nil); code != 200 {
		t.Fatalf("ops assigns the member to alice: %d", code)
	}
	alice := open(a, "alice")
	must(t, alice.WriteMessage(websocket.BinaryMessage, []byte("echo al$((2+3))ice\r")))
	if got := readUntil(alice, "al5ice"); !strings.Contains(got, "al5ice") {
		t.Fatalf("alice's serial console read %q; want her command's output", got)
	}
	// Ops's console ends saying who came (the history keeps its words,
	// which the page said), and his page loads again by itself beside
	// her, view only, and shows her line.
	waitFor(t, 30*time.Second, "ops's page loaded again", func() bool {
		v, err := ops.Evaluate(`() => window.notLoadedAgain === undefined && document.getElementById('status').textContent`)
		return err == nil && v == "Connected"
	})
	must(t, alice.WriteMessage(websocket.BinaryMessage, []byte("echo wat$((3*3))ch\r")))
	waitXterm(t, ops, regexp.MustCompile(`wat9ch`), 30*time.Second)
	// His page names her the holder and him view only: it is not the
	// holder's notice (which said "you (holder)" to him).
	// (ada's page, beside ops's before, loads again beside hers too.)
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(10000)).Locator(ops.GetByTestId("watch-notice")).ToHaveText(
		regexp.MustCompile(`^On it: alice \(holder\)(, ada \(view only\))?, ops \(you, view only\)(, ada \(view only\))?$`)))
	var sessions []struct {
		User, Protocol, CloseReason string
	}
	c.p.API(t, "ops", "GET", "/api/vdi/history/sessions?limit=1000", &sessions)
	said := false
	for _, s := range sessions {
		said = said || s.User == "ops" && s.Protocol == "serial" && strings.HasPrefix(s.CloseReason, "Role changed: alice claimed this desktop and opened its serial console")
	}
	if !said {
		t.Errorf("no serial session of ops's closed saying alice claimed the desktop and opened its serial console: %+v", sessions)
	}
	screenshot(t, ops, "ha-admin-serial-gave-way")
	if n := hs.standIn.Consoles(hs.ns, hs.member, "console"); n.Opened != before.Opened+2 || n.Kicked != before.Kicked {
		t.Errorf("the VMI's serial console: %+v, before %+v; want 2 more opened (ops's, then alice's), none kicked", n, before)
	}
}

// secondAdminWatches: ada, another admin, opens the serial console of
// the member nobody holds on a while ops's page holds its line on c: hers
// joins his, view only, and her page says so (it waited 10 s and was
// refused before); her page shows his line, and her keys stay in it.
func secondAdminWatches(t *testing.T, hs *haScreen, a *haReplica, ops playwright.Page) {
	t.Helper()
	ada := adminSerialPage(t, hs, a, "ada")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	must(t, expect.Locator(ada.GetByTestId("status")).ToHaveText("Connected, view only"))
	must(t, expect.Locator(ada.GetByTestId("line-notice")).ToHaveText(
		"Another admin has this serial console open, and it takes one client: you watch theirs, view only. Connect again once they have closed it to type in it."))
	must(t, ada.Locator("#screen .xterm").Click())
	must(t, ada.Keyboard().Type("echo ad$((1+2))a\n"))
	must(t, ops.Keyboard().Type("echo op$((2+2))s\n"))
	waitXterm(t, ada, regexp.MustCompile(`op4s`), 20*time.Second)
	waitXterm(t, ops, regexp.MustCompile(`op4s`), 20*time.Second)
	v, err := ops.Evaluate(xtermText)
	must(t, err)
	if text, _ := v.(string); strings.Contains(text, "ad3a") {
		t.Errorf("ops's serial console shows ada's command (ad3a): her keys, view only, reached the line:\n%s", text)
	}
	for _, size := range []struct {
		name string
		w, h int
	}{{"tablet", 1024, 1366}, {"phone", 390, 844}, {"laptop", 1280, 800}} {
		must(t, ada.SetViewportSize(size.w, size.h))
		screenshot(t, ada, "ha-second-admin-watches-"+size.name)
	}
	unheldLineAttacks(t, hs, a)
}

// adminSerialPage opens admin user's console page of hs's member's
// serial console in Chromium, through an nginx that vouches for them and
// sends every request to r, and waits until it is connected.
func adminSerialPage(t *testing.T, hs *haScreen, r *haReplica, user string) playwright.Page {
	t.Helper()
	lb := MustStartNginxFor(t, user, r.p.URL)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	t.Cleanup(func() {
		if t.Failed() {
			screenshot(t, page, "ha-admin-serial-failed")
		}
	})
	if _, err := page.Goto(lb.User + "/desktops/" + hs.ns + "/" + hs.member + "?protocol=serial"); err != nil {
		t.Fatal(err)
	}
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, expect.Locator(page.GetByTestId("status")).ToContainText("Connected"))
	return page
}
