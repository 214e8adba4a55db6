package e2e

import (
	"regexp"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 58, items 6 and 9: the home page never leaves its user guessing.
// A claim on a pool closed to them since the page loaded says so, a pool
// whose desktop they hold points to it rather than offering a second
// Open, and the page after a release does not say "yet". Where the
// screen is wide, the pools stand beside my desktops.
func TestHomeDeadEnds_ClosedPoolAndOneOpen(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_ADMINS=ops")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name":"lab","size":1}`, nil); code != 201 {
		t.Fatalf("creating pool lab: %d", code)
	}
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	for _, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			user := "kim-" + s.name
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, user, "/")
			lab := page.Locator(`[data-testid=pool][data-pool=lab]`)
			must(t, expect.Locator(lab.GetByTestId("get-desktop")).ToBeVisible())
			// The admin closes lab to everyone but ops while the page is open.
			if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/lab", `{"access":{"users":["ops"]}}`, nil); code != 200 {
				t.Fatalf("closing lab: %d", code)
			}
			must(t, lab.GetByTestId("get-desktop").Click())
			must(t, expect.Locator(page.GetByTestId("notice")).ToContainText("That pool is not open to you"))
			must(t, expect.Locator(page.Locator(`[data-testid=pool][data-pool=lab]`)).ToHaveCount(0))
			screenshot(t, page, "closed-pool")
			if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/lab", `{"access":{}}`, nil); code != 200 {
				t.Fatalf("opening lab again: %d", code)
			}

			d := mustClaim(t, p, user, "demo")
			_, err := page.Goto(p.URL + "/")
			must(t, err)
			must(t, expect.Locator(page.GetByTestId("open")).ToHaveCount(1))
			demo := page.Locator(`[data-testid=pool][data-pool=demo]`)
			must(t, expect.Locator(demo.GetByTestId("yours")).ToContainText(d.Name))
			// A few tiles leave no screen mostly empty: where it is wide
			// (the laptop, the tablet) the pools stand beside my desktops,
			// reaching the page's right edge; on the phone, below them.
			mine, pool, main := box(t, page.GetByTestId("desktop")), box(t, demo), box(t, page.Locator("main"))
			if wide := s.width >= 768; wide != (pool.X >= mine.X+mine.Width && pool.Y < mine.Y+mine.Height) {
				t.Errorf("at %d px the pool's tile %+v, my desktop's %+v; want the pools beside my desktops: %v", s.width, *pool, *mine, wide)
			}
			if right := main.X + main.Width; pool.X+pool.Width < right-40 {
				t.Errorf("at %d px the tiles end at %.0f px of the page's %.0f: the rest is empty", s.width, pool.X+pool.Width, right)
			}
			// The header is one line at every size: Sign out beside the
			// first link, inside the page (at 390 px it wrapped under it).
			signOut, first := box(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign out"})), box(t, page.GetByTestId("my-history-link"))
			if signOut.Y >= first.Y+first.Height || first.Y >= signOut.Y+signOut.Height || signOut.X+signOut.Width > float64(s.width) {
				t.Errorf("at %d px Sign out lies at %+v, My sessions at %+v; want both on the header's one line, inside the page", s.width, *signOut, *first)
			}
			screenshot(t, page, "one-open")
			if code := p.API(t, user, "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
				t.Fatalf("release: %d", code)
			}
			_, err = page.Goto(p.URL + "/")
			must(t, err)
			must(t, expect.Locator(page.GetByTestId("no-desktops")).Not().ToContainText(regexp.MustCompile(`\byet\b`)))
		})
	}
}
