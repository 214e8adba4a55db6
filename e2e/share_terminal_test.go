package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestShare_Terminal: alice shares the terminal she has open. bob (view
// only) opens her link and sees her shell, its recent lines included;
// what he types never reaches it. carol (with control) types into the
// same shell and alice sees it. Nobody's console gets a shell of its own.
// Before alice opens hers, dave's invitation page and ops's (an admin)
// terminal page say why they are refused and what to do
// (refusedTerminalPages).
func TestShare_Terminal(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	d := mustClaim(t, p, "alice", "demo")
	desktopPath := "/api/vdi/desktops/local/" + d.Name
	refusedTerminalPages(t, p, b, d.Name)

	alice := b.MustNewPage(t, 1280, 800)
	signIn(t, alice, p, "alice", "/desktops/local/"+d.Name+"?protocol=terminal")
	must(t, expect.Locator(alice.GetByTestId("status")).ToContainText("Connected"))
	waitXterm(t, alice, regexp.MustCompile(`\$ $|\$ \n`), 20*time.Second)
	must(t, alice.Keyboard().Type("echo before-$((6*7)) $$\n"))
	pid := waitXterm(t, alice, regexp.MustCompile(`before-42 \d+`), 10*time.Second)

	must(t, alice.GetByTestId("share-toggle").Click())
	must(t, alice.GetByTestId("share-user").Fill("bob"))
	must(t, alice.GetByTestId("share-invite").Click())
	// Her invitations: dave's (refusedTerminalPages) and bob's. Counting
	// one row passed only while bob's had not shown yet.
	must(t, expect.Locator(alice.GetByTestId("share-row").Filter(playwright.LocatorFilterOptions{HasText: "bob,"})).ToHaveCount(1))
	must(t, expect.Locator(alice.GetByTestId("share-row")).ToHaveCount(2))
	href, err := alice.GetByTestId("share-link").GetAttribute("href")
	must(t, err)
	if !strings.HasSuffix(href, "/shared/local/"+d.Name+"?protocol=terminal") {
		t.Fatalf("the invitation's link from a terminal is %q; want it to open the terminal", href)
	}
	bob := b.MustNewPage(t, 1280, 800)
	signIn(t, bob, p, "bob", strings.TrimPrefix(href, p.URL))
	must(t, expect.Locator(bob.GetByTestId("status")).ToContainText("Connected"))
	must(t, expect.Locator(bob.GetByTestId("share-role")).ToHaveText("view only"))
	waitXterm(t, bob, regexp.MustCompile(regexp.QuoteMeta(pid)), 10*time.Second) // alice's recent lines
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToContainText("bob is watching this desktop (view only)."))
	must(t, bob.Locator("#screen .xterm").Click())
	must(t, bob.Keyboard().Type("echo bob-was-here\n"))
	must(t, alice.Locator("#screen .xterm").Click()) // back from the Share panel
	must(t, alice.Keyboard().Type("echo after-$((7*8)) $$\n"))
	waitXterm(t, bob, regexp.MustCompile(`after-56 \d+`), 10*time.Second)
	if got := waitXterm(t, alice, regexp.MustCompile(`after-56 \d+`), 10*time.Second); strings.Fields(got)[1] != strings.Fields(pid)[1] {
		t.Errorf("alice's shell changed: %q, then %q", pid, got)
	}
	v, err := alice.Evaluate(xtermText)
	must(t, err)
	if strings.Contains(v.(string), "bob-was-here") {
		t.Error("bob, view only, typed into alice's terminal")
	}
	screenshot(t, bob, "shared-terminal")

	var sh struct{ URL string }
	if code := p.APIBody(t, "alice", "POST", desktopPath+"/shares", `{"user":"carol","control":true}`, &sh); code != 201 {
		t.Fatalf("alice invites carol with control: %d", code)
	}
	carol := b.MustNewPage(t, 1280, 800)
	signIn(t, carol, p, "carol", sh.URL+"?protocol=terminal")
	must(t, expect.Locator(carol.GetByTestId("status")).ToContainText("Connected"))
	must(t, expect.Locator(carol.GetByTestId("share-role")).ToHaveText("you can type and point"))
	must(t, carol.Locator("#screen .xterm").Click())
	must(t, carol.Keyboard().Type("echo carol-$((8*9)) $$\n"))
	got := waitXterm(t, alice, regexp.MustCompile(`carol-72 \d+`), 10*time.Second)
	if strings.Fields(got)[1] != strings.Fields(pid)[1] {
		t.Errorf("carol typed into shell %q; want alice's, %q", got, pid)
	}
	waitXterm(t, bob, regexp.MustCompile(`carol-72 \d+`), 10*time.Second)
	must(t, expect.Locator(alice.GetByTestId("status")).ToContainText("Connected"))
}

// refusedTerminalPages opens, while alice holds member with no terminal
// open, dave's invitation page and ops's console page of its terminal at
// each issue size: neither connects, and each says why in the portal's
// words (the page asked before dialing: a browser cannot read a refused
// websocket's answer) and what to do, with a way to try again. Before,
// both said only "The connection was lost."
func refusedTerminalPages(t *testing.T, p *Portal, b *Browser, member string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	var sh struct{ URL string }
	if code := p.APIBody(t, "alice", "POST", "/api/vdi/desktops/local/"+member+"/shares", `{"user":"dave"}`, &sh); code != 201 {
		t.Fatalf("alice invites dave: %d", code)
	}
	for _, c := range []struct{ user, path, says, then string }{
		{"dave", sh.URL + "?protocol=terminal", "alice has no terminal console of local/" + member + " open to share.", "Ask alice to open it, then open the link again."},
		{"ops", "/desktops/local/" + member + "?protocol=terminal", "alice has no terminal console of local/" + member + " open to watch.", "Watch its screen, or open this console again once alice has"},
	} {
		for _, size := range issueSizes {
			page := b.MustNewPage(t, size.width, size.height)
			signIn(t, page, p, c.user, strings.TrimPrefix(c.path, p.URL))
			must(t, expect.Locator(page.GetByTestId("ended-title")).ToHaveText("Not connected"))
			must(t, expect.Locator(page.GetByTestId("ended-reason")).ToContainText(c.says))
			must(t, expect.Locator(page.GetByTestId("ended-reason")).ToContainText(c.then))
			must(t, expect.Locator(page.Locator("#reconnect")).ToHaveText("Try again"))
			must(t, expect.Locator(page.Locator("#reconnect")).ToBeInViewport())
			screenshot(t, page, "refused-terminal-"+c.user+"-"+size.name)
			page.Close()
		}
	}
	// A preflight that says yes (as one does where the console's record
	// names a replica that no longer shares it) and a websocket refused:
	// the page says the websocket's refusal (before: "connection lost").
	page := b.MustNewPage(t, 1280, 800)
	defer page.Close()
	must(t, page.Route("**/ws/terminal/**", func(r playwright.Route) {
		must(t, r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(204)}))
	}))
	signIn(t, page, p, "dave", strings.TrimPrefix(sh.URL+"?protocol=terminal", p.URL))
	must(t, expect.Locator(page.GetByTestId("ended-title")).ToHaveText("Not connected"))
	must(t, expect.Locator(page.GetByTestId("ended-reason")).ToContainText("alice has no terminal console of local/"+member+" open to share."))
	screenshot(t, page, "refused-terminal-in-band")
}
