package e2e

import (
	"sync/atomic"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsoleChip_LateFirstRoundTrip: the connection chip times a round
// trip as the page starts, before the console is open (the portal names no
// path then), and again once the console connects. On a busy machine the
// first answer comes after the console connected; the second timing,
// asked for meanwhile, must still run, so the chip shows without any
// input from the user (a CI run's console bar kept it hidden a minute).
// The page's first request is answered with what the portal answered
// before the console opened, once the console connected.
func TestConsoleChip_LateFirstRoundTrip(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	d := mustClaim(t, p, "gus", "demo")
	link := "/api/vdi/desktops/local/" + d.Name + "/link"
	var before struct {
		Path *string `json:"path"`
	}
	if code := p.API(t, "gus", "GET", link, &before); code != 200 || before.Path == nil || *before.Path != "" {
		t.Fatalf("GET %s before a console opened: %d %v; want 200 and no path", link, code, before.Path)
	}
	page := uxPage(t, b, 1280, 800, false)
	var links atomic.Int32
	held := make(chan func(), 1)
	must(t, page.Route("**"+link, func(r playwright.Route) {
		if links.Add(1) == 1 {
			held <- func() {
				r.Fulfill(playwright.RouteFulfillOptions{Status: playwright.Int(200), ContentType: playwright.String("application/json"), Body: `{"path":""}`})
			}
			return
		}
		r.Continue()
	}))
	signIn(t, page, p, "gus", "/desktops/local/"+d.Name)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	(<-held)()
	must(t, expect.Locator(page.GetByTestId("connection-chip")).ToBeVisible())
	if n := links.Load(); n < 2 {
		t.Errorf("the page timed %d round trips; want one more once the console connected", n)
	}
}
