package e2e

import (
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 58, item 3: sharing has no dead ends. Inviting bob again updates
// his one invitation (so one Revoke ends his access), bob's home page
// shows what is shared with him, and the holder sees who is on it in an
// "On it:" line that no open panel hides.
func TestShareDeadEnds_OneInvitationAndSharedWithMe(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	// alice signs in with a long login (a company's e-mail address), which
	// bob's phone must still read whole.
	const holder = "alice.vandenberghe@example.com"
	alice, d := MustOpenConsole(t, b, p, holder, "demo", 1280, 800, false)
	invite := func(control bool) {
		t.Helper()
		must(t, alice.GetByTestId("share-user").Fill("bob"))
		must(t, alice.GetByTestId("share-control").SetChecked(control))
		must(t, alice.GetByTestId("share-invite").Click())
		must(t, expect.Locator(alice.GetByTestId("share-note")).ToContainText("Invited bob"))
	}
	must(t, alice.GetByTestId("share-toggle").Click())
	invite(false)
	screenshot(t, alice, "invited-once")
	invite(true)
	must(t, expect.Locator(alice.GetByTestId("share-row")).ToHaveCount(1))
	must(t, expect.Locator(alice.GetByTestId("share-hand")).ToHaveText("Take control back"))

	// bob finds it on his home page, not only through a link.
	bob := b.MustNewPhonePage(t, 390, 844)
	signIn(t, bob, p, "bob", "/")
	tile := bob.GetByTestId("shared")
	must(t, expect.Locator(tile).ToHaveCount(1))
	must(t, expect.Locator(tile).ToContainText(holder+" shares it with you"))
	must(t, expect.Locator(tile).ToContainText("with control"))
	screenshot(t, bob, "home-shared-with-me")
	must(t, tile.GetByTestId("open-shared").Click())
	must(t, expect.Locator(bob.GetByTestId("status")).ToHaveText("Connected"))
	// On his phone the header reads whole: whose desktop, which one, and
	// (in its Menu) who is on it (it ended in … at 390 px).
	must(t, expect.Locator(bob.GetByTestId("desktop-name")).ToHaveText(holder+" shares local/"+d.Name+" with you"))
	must(t, expect.Locator(bob.GetByTestId("participants")).ToHaveText("On it: "+holder+" (holder), bob (you, can type)"))
	openWatchMenu(t, bob)
	must(t, expect.Locator(bob.GetByTestId("participants")).ToBeVisible())
	for _, id := range []string{"desktop-name", "participants", "share-role", "status"} {
		cut, err := bob.GetByTestId(id).Evaluate(`e => e.scrollWidth > e.clientWidth + 1 || e.getBoundingClientRect().right > innerWidth`, nil)
		must(t, err)
		if cut == true {
			t.Errorf("bob's header at 390 px cuts %s: %q", id, mustText(t, bob.GetByTestId(id)))
		}
	}
	screenshot(t, bob, "shared-view-phone")

	// alice sees bob, in words and in the "On it:" line, beside her open panel.
	must(t, expect.Locator(alice.GetByTestId("watch-notice")).ToContainText("bob has a console of it open"))
	must(t, expect.Locator(alice.GetByTestId("holder-participants")).ToHaveText("On it: you (holder), bob (can type)"))
	notice, err := alice.GetByTestId("watch-notice").BoundingBox()
	must(t, err)
	panel, err := alice.GetByTestId("share-panel").BoundingBox()
	must(t, err)
	if notice.X < panel.X+panel.Width && panel.X < notice.X+notice.Width && notice.Y < panel.Y+panel.Height && panel.Y < notice.Y+notice.Height {
		t.Errorf("the watch notice %+v lies under the Share panel %+v", *notice, *panel)
	}
	screenshot(t, alice, "holder-notice-beside-panel")

	// One Revoke ends bob's access: no second invitation lets him in.
	must(t, alice.GetByTestId("share-revoke").Click())
	must(t, expect.Locator(alice.GetByTestId("share-row")).ToHaveCount(0))
	must(t, expect.Locator(bob.GetByTestId("ended")).ToBeVisible())
	if code := p.API(t, "bob", "GET", "/api/vdi/desktops/local/"+d.Name+"/connect", nil); code != 403 {
		t.Errorf("attack re-invited-then-revoked: bob's /connect after the revoke: %d; want 403", code)
	}
	_, err = bob.Goto(p.URL + "/")
	must(t, err)
	must(t, expect.Locator(bob.GetByTestId("shared")).ToHaveCount(0))
}
