package e2e

import (
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// openConsole signs user in on a fresh page and opens the VNC console of
// their desktop in pool demo, claiming one if needed; it returns the page
// and the member.
func openConsole(t *testing.T, b *Browser, p *Portal, user string) (playwright.Page, string) {
	t.Helper()
	var d desktop
	if code := p.API(t, user, "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 {
		t.Fatalf("claim for %s: %d", user, code)
	}
	page := b.MustNewPage(t, 1024, 700)
	signIn(t, page, p, user, "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(15000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	return page, d.Name
}

// signIn uses the sign-in-by-name page, then lands on next.
func signIn(t *testing.T, page playwright.Page, p *Portal, user, next string) {
	t.Helper()
	if _, err := page.Goto(p.URL + "/signin?next=" + next); err != nil {
		t.Fatal(err)
	}
	must(t, page.GetByTestId("login").Fill(user))
	must(t, page.GetByTestId("signin").Click())
	// The next page has loaded (its module scripts have run), so a click
	// right after lands on a control that answers.
	must(t, page.WaitForURL(func(u string) bool {
		parsed, err := url.Parse(u)
		return err == nil && parsed.Path != "/signin"
	}))
}

// holder returns who holds member now ("" when free), asking as an admin.
func holder(t *testing.T, p *Portal, member string) string {
	var all []desktop
	p.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all)
	for _, d := range all {
		if d.Name == member {
			return d.Holder
		}
	}
	return ""
}

// TestReclaim_DisconnectGrace closes the console tab: after the grace the
// desktop is reclaimed; reopening it within the grace keeps it.
func TestReclaim_DisconnectGrace(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DISCONNECT_GRACE=10s", "CORRAL_VDI_RECLAIM_INTERVAL=500ms")
	b := MustLaunchBrowser(t)

	t.Run("ReconnectWithinGraceKeepsIt", func(t *testing.T) {
		page, member := openConsole(t, b, p, "alice")
		must(t, page.Close())
		time.Sleep(3 * time.Second)
		again, _ := openConsole(t, b, p, "alice")
		time.Sleep(9 * time.Second) // past the first grace's deadline
		if h := holder(t, p, member); h != "alice" {
			t.Fatalf("after reconnecting inside the grace, %s is held by %q; want alice", member, h)
		}
		screenshot(t, again, "reconnected")
		must(t, again.Close())
	})

	t.Run("ClosedTabIsReclaimedAfterGrace", func(t *testing.T) {
		page, member := openConsole(t, b, p, "bob")
		must(t, page.Close())
		if h := holder(t, p, member); h != "bob" {
			t.Fatalf("right after closing the tab %s is held by %q; want bob until the grace ends", member, h)
		}
		if !eventually(20*time.Second, func() bool { return holder(t, p, member) == "" }) {
			t.Fatalf("%s still held by bob 20s after closing the tab with a 10s grace", member)
		}
		if log := p.Log(); !strings.Contains(log, "rule=disconnect-grace") {
			t.Errorf("portal log does not show the reclaim rule:\n%s", log)
		}
	})
}

// TestReclaim_IdleFromRealInput: a console that only receives frames goes
// idle and is reclaimed with a warning first; one whose user moves the
// mouse stays.
func TestReclaim_IdleFromRealInput(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_IDLE_TIMEOUT=20s", "CORRAL_VDI_RECLAIM_INTERVAL=500ms")
	b := MustLaunchBrowser(t)
	active, activeMember := openConsole(t, b, p, "alice")
	box, err := active.Locator("#screen canvas").BoundingBox()
	must(t, err)
	wiggle := func(i int) {
		x := box.X + box.Width*float64(300+i%2*200)/1280
		must(t, active.Mouse().Move(x, box.Y+box.Height/2))
	}
	wiggle(0)
	idle, idleMember := openConsole(t, b, p, "bob")
	wiggle(1)

	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	must(t, expect.Locator(idle.GetByTestId("reclaim-banner")).ToContainText("No input for a while"))
	screenshot(t, idle, "idle-warning")

	deadline := time.Now().Add(35 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		wiggle(i)
		if holder(t, p, idleMember) == "" {
			break
		}
		time.Sleep(time.Second)
	}
	if h := holder(t, p, idleMember); h != "" {
		t.Fatalf("bob's console saw only frames for 35s with a 20s idle timeout, yet %s is still held by %q", idleMember, h)
	}
	must(t, expect.Locator(idle.GetByTestId("status")).ToContainText("no input for too long"))
	screenshot(t, idle, "idle-reclaimed")
	if h := holder(t, p, activeMember); h != "alice" {
		t.Errorf("alice moved the mouse all along, yet %s is held by %q", activeMember, h)
	}
}

// TestReclaim_ForceReleaseClosesTheConsole: an admin's force-release ends
// the holder's console with who and why.
func TestReclaim_ForceReleaseClosesTheConsole(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops")
	page, member := openConsole(t, MustLaunchBrowser(t), p, "alice")
	req := `{"reason": "patching the host"}`
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/desktops/local/"+member+"/release", req, nil); code != 200 {
		t.Fatalf("force-release: %d", code)
	}
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(10000)).Locator(page.GetByTestId("status")).
		ToHaveText("An admin (ops) released this desktop. Reason: patching the host."))
	screenshot(t, page, "force-released")
}

// TestReclaim_RestartKeepsTheDeadline kills the portal during a grace; the
// next process reclaims at the original deadline, not a new one: the
// deadline it shows is the one the first showed (or, on a slow restart,
// it has reclaimed already), and the claim ends.
func TestReclaim_RestartKeepsTheDeadline(t *testing.T) {
	data, err := os.MkdirTemp("", "cvd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeData(data) })
	const grace = 6 * time.Second
	env := []string{"CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DISCONNECT_GRACE=6s", "CORRAL_VDI_RECLAIM_INTERVAL=500ms"}
	first := mustStartPortalIn(t, data, append(env, "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=false")...)
	var d desktop
	first.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d)
	ws, _, err := dialConsole(first, "alice", d.Name, first.URL)
	if err != nil {
		t.Fatal(err)
	}
	ws.Close()
	// The portal records the disconnect: the grace then runs from it, past
	// the claim's own deadline.
	var before desktop
	if !eventually(30*time.Second, func() bool {
		first.API(t, "ops", "GET", "/api/vdi/desktops/local/"+d.Name, &before)
		return before.Reclaim != nil && before.Reclaim.Rule == "disconnect-grace" && before.Reclaim.At.After(before.ClaimedAt.Add(grace))
	}) {
		t.Fatalf("the disconnect of %s was not recorded: %+v (reclaim %+v); want a disconnect grace from the console's close", d.Name, before, before.Reclaim)
	}
	first.cmd.Process.Signal(syscall.SIGKILL)
	first.cmd.Wait()

	second := mustStartPortalIn(t, data, env...)
	var after desktop
	second.API(t, "ops", "GET", "/api/vdi/desktops/local/"+d.Name, &after)
	switch {
	case after.Holder == "":
		t.Logf("reclaimed already when the restarted portal first answered: the deadline %v was kept", before.Reclaim.At)
	case after.Holder != "alice" || after.Reclaim == nil || !after.Reclaim.At.Equal(before.Reclaim.At):
		t.Errorf("after the restart %s is held by %q, to be reclaimed %+v; want alice's claim with the deadline kept: %+v", d.Name, after.Holder, after.Reclaim, before.Reclaim)
	}
	if !eventually(60*time.Second, func() bool { return holder(t, second, d.Name) == "" }) {
		t.Fatalf("not reclaimed 60s after the restart; the deadline was %v", before.Reclaim.At)
	}
	if !eventually(30*time.Second, func() bool { return auditHas(t, second, "", "reclaim", d.Name, "disconnect-grace") }) {
		t.Errorf("no disconnect-grace reclaim of %s in the audit log; want the claim ended by its grace", d.Name)
	}
	t.Logf("reclaimed %v after its deadline (grace 6s, loop 0.5s)", time.Since(before.Reclaim.At).Round(100*time.Millisecond))
}

// TestReclaim_AdminWatchingDoesNotHoldTheClaim: an admin's console on a
// user's desktop does not hold off the holder's disconnect grace.
func TestReclaim_AdminWatchingDoesNotHoldTheClaim(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DISCONNECT_GRACE=5s", "CORRAL_VDI_RECLAIM_INTERVAL=500ms")
	d := mustClaim(t, p, "alice", "demo")
	ws, _, err := dialConsole(p, "ops", d.Name, p.URL)
	if err != nil {
		t.Fatalf("admin's console: %v", err)
	}
	defer ws.Close()
	if !eventually(15*time.Second, func() bool { return holder(t, p, d.Name) == "" }) {
		t.Fatal("alice's unused claim outlived its 5s grace while an admin watched")
	}
	ws.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			if !strings.Contains(err.Error(), "reclaimed") {
				t.Errorf("admin's console ended with %v; want the reclaim reason", err)
			}
			break
		}
	}
}
