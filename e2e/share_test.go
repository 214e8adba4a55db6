package e2e

import (
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestShare_InviteWatchRevoke: alice shares her desktop with bob from the
// console's Share panel; bob opens the link and sees the screen, view
// only, and alice's console says he is there; a stranger with the same
// link gets nothing; revoking closes bob's console at once with the
// reason, and a release ends an invitation with control.
func TestShare_InviteWatchRevoke(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	d := mustClaim(t, p, "alice", "demo")
	desktopPath := "/api/vdi/desktops/local/" + d.Name

	alice := b.MustNewPage(t, 1280, 800)
	signIn(t, alice, p, "alice", "/desktops/local/"+d.Name)
	must(t, expect.Locator(alice.GetByTestId("status")).ToHaveText("Connected"))
	must(t, alice.GetByTestId("share-toggle").Click())
	must(t, alice.GetByTestId("share-user").Fill("bob"))
	must(t, alice.GetByTestId("share-invite").Click())
	must(t, expect.Locator(alice.GetByTestId("share-note")).ToContainText("Invited bob (view only) until"))
	must(t, expect.Locator(alice.GetByTestId("share-row")).ToHaveCount(1))
	screenshot(t, alice, "share-panel")
	href, err := alice.GetByTestId("share-link").GetAttribute("href")
	must(t, err)
	if !strings.HasSuffix(href, "/shared/local/"+d.Name) {
		t.Fatalf("the invitation's link is %q", href)
	}
	link := strings.TrimPrefix(href, p.URL)

	bob := b.MustNewPage(t, 1280, 800)
	signIn(t, bob, p, "bob", link)
	must(t, expect.Locator(bob.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(bob.GetByTestId("desktop-name")).ToHaveText("alice shares local/"+d.Name+" with you"))
	must(t, expect.Locator(bob.GetByTestId("share-role")).ToHaveText("view only"))
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToContainText("bob is watching this desktop (view only)."))
	must(t, expect.Locator(alice.GetByTestId("status")).ToHaveText("Connected")) // bob never kicks alice
	must(t, expect.Locator(bob.GetByTestId("participants")).ToHaveText("On it: alice (holder), bob (you, view only)"))
	screenshot(t, bob, "shared-view")

	// Only the holder manages invitations; an invitation opens the screen
	// and the consoles the holder has open (TestShare_Terminal), never a
	// console of the invitee's own.
	for _, c := range []struct {
		user, method, path, body string
		want                     int
	}{
		{"bob", "GET", desktopPath + "/shares", "", 403},
		{"bob", "POST", desktopPath + "/shares", `{"user":"carol"}`, 403},
		{"mallory", "POST", desktopPath + "/shares", `{"user":"mallory"}`, 403},
		{"alice", "POST", desktopPath + "/shares", `{"user":"carol","expires":"forever"}`, 400},
		{"alice", "POST", desktopPath + "/shares", `{"user":"carol","expires":"48h"}`, 400},
		{"bob", "POST", desktopPath + "/release", "", 403},
	} {
		if code := p.APIBody(t, c.user, c.method, c.path, c.body, nil); code != c.want {
			t.Errorf("%s %s %s %s: %d; want %d", c.user, c.method, c.path, c.body, code, c.want)
		}
	}
	if ws, res, err := dialWS(p, "bob", "/ws/terminal/local/"+d.Name, p.URL); err == nil {
		ws.Close()
		t.Error("bob opened a terminal of alice's desktop while she has none open")
	} else if res == nil || res.StatusCode != 409 {
		t.Errorf("bob's terminal, alice having none open: %v %v; want 409", res, err)
	}
	if ws, res, err := dialWS(p, "mallory", "/ws/vnc/local/"+d.Name, p.URL); err == nil {
		ws.Close()
		t.Error("mallory, never invited, opened the screen")
	} else if res == nil || res.StatusCode != 403 {
		t.Errorf("mallory's VNC: %v %v; want 403", res, err)
	}
	mallory := b.MustNewPage(t, 1280, 800)
	signIn(t, mallory, p, "mallory", link)
	must(t, expect.Locator(mallory.GetByTestId("error")).ToContainText("no invitation to it is open for you"))

	// Control in one click, and back: bob's page reopens with the role.
	must(t, alice.GetByTestId("share-hand").Click())
	must(t, expect.Locator(alice.GetByTestId("share-note")).ToHaveText("bob may type and point now."))
	must(t, expect.Locator(bob.GetByTestId("share-role")).ToHaveText("you can type and point"))
	must(t, expect.Locator(bob.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(bob.GetByTestId("participants")).ToHaveText("On it: alice (holder), bob (you, can type)"))
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToContainText("bob has a console of it open and can type in it."))
	must(t, expect.Locator(alice.GetByTestId("share-hand")).ToHaveText("Take control back"))
	must(t, alice.GetByTestId("share-hand").Click())
	must(t, expect.Locator(bob.GetByTestId("share-role")).ToHaveText("view only"))
	must(t, expect.Locator(bob.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToContainText("bob is watching this desktop (view only)."))
	if code := p.APIBody(t, "bob", "PATCH", desktopPath+"/shares/x", `{"control":true}`, nil); code != 403 {
		t.Errorf("bob hands himself control: %d; want 403", code)
	}

	// Revoke: bob's console ends at once, saying why; alice's notice goes.
	must(t, alice.GetByTestId("share-revoke").Click())
	must(t, expect.Locator(alice.GetByTestId("share-note")).ToHaveText("bob can no longer see this desktop."))
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(3000)).Locator(bob.GetByTestId("status")).ToHaveText("alice stopped sharing this desktop."))
	must(t, expect.Locator(bob.GetByTestId("ended-title")).ToHaveText("This console has closed"))
	must(t, expect.Locator(bob.GetByTestId("home")).ToBeVisible())
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToBeHidden())
	must(t, expect.Locator(alice.GetByTestId("status")).ToHaveText("Connected"))
	screenshot(t, bob, "shared-revoked")
	_, err = bob.Reload()
	must(t, err)
	must(t, expect.Locator(bob.GetByTestId("error")).ToContainText("no invitation to it is open for you"))

	// With control, then the release: the invitation goes with the claim.
	var sh struct{ URL string }
	if code := p.APIBody(t, "alice", "POST", desktopPath+"/shares", `{"user":"carol","control":true,"expires":"30m"}`, &sh); code != 201 {
		t.Fatalf("alice invites carol with control: %d", code)
	}
	carol := b.MustNewPage(t, 1280, 800)
	signIn(t, carol, p, "carol", sh.URL)
	must(t, expect.Locator(carol.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(carol.GetByTestId("share-role")).ToHaveText("you can type and point"))
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToContainText("carol has a console of it open and can type in it"))
	if code := p.API(t, "alice", "POST", desktopPath+"/release", nil); code != 200 {
		t.Fatalf("alice releases: %d", code)
	}
	must(t, expect.Locator(carol.GetByTestId("status")).ToContainText("released"))
	if code := p.API(t, "ops", "GET", desktopPath+"/shares", nil); code != 409 {
		t.Errorf("an admin lists the invitations of the released desktop: %d; want 409 (not claimed)", code)
	}
}

// TestShare_CLI: an admin invites from the CLI (past the pool's access
// rules), lists and revokes; the invitee's console opens and then is
// refused.
func TestShare_CLI(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	d := mustClaim(t, p, "alice", "demo")
	desktop := "local/" + d.Name
	out := p.mustCLI(t, "share", desktop, "dave", "-control", "-expires", "10m")
	if !strings.Contains(out, "invited dave to "+desktop+" (control) until") || !strings.Contains(out, p.URL+"/shared/"+desktop) {
		t.Errorf("share printed:\n%s", out)
	}
	list := p.mustCLI(t, "shares", desktop)
	lines := strings.Split(strings.TrimSpace(list), "\n")
	fields := strings.Fields(lines[len(lines)-1]) // ID USER ROLE BY UNTIL
	if len(fields) < 4 || fields[1] != "dave" || fields[2] != "control" {
		t.Fatalf("shares printed:\n%s", list)
	}
	ws, res, err := dialWS(p, "dave", "/ws/vnc/"+desktop, p.URL)
	if err != nil {
		t.Fatalf("dave opens the screen he was invited to: %v %v", err, res)
	}
	ws.Close()
	if _, errOut, code := p.cli(t, "share", desktop, "alice"); code != 2 || !strings.Contains(errOut, "the holder has the console already") {
		t.Errorf("share with the holder: exit %d; want 2 (refused as asked)\n%s", code, errOut)
	}
	if _, _, code := p.cli(t, "unshare", desktop, "nope"); code != 3 {
		t.Errorf("unshare an unknown id: exit %d; want 3 (not found)", code)
	}
	p.mustCLI(t, "unshare", desktop, fields[0])
	if ws, res, err := dialWS(p, "dave", "/ws/vnc/"+desktop, p.URL); err == nil {
		ws.Close()
		t.Error("dave opened the screen after the invitation was revoked")
	} else if res == nil || res.StatusCode != 403 {
		t.Errorf("dave after unshare: %v %v; want 403", res, err)
	}
}
