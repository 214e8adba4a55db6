package e2e

import (
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestKiosk_LinkFromAnotherSiteAsksFirst follows a link to the kiosk from
// another site (http://localhost is another site than http://127.0.0.1)
// in a real Chromium: nothing is claimed until the visitor presses the
// page's button, whose same-origin POST claims and shows the desktop.
func TestKiosk_LinkFromAnotherSiteAsksFirst(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1024, 700)
	signIn(t, page, p, "kiosk3", "/")
	must(t, page.WaitForURL(p.URL+"/"))
	other := strings.Replace(p.URL, "127.0.0.1", "localhost", 1)
	_, err := page.Goto(other + "/signin")
	must(t, err)
	_, err = page.Evaluate(`(to) => { const a = document.createElement('a'); a.href = to; document.body.append(a); a.click(); }`, p.URL+"/kiosk/demo")
	must(t, err)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	must(t, expect.Locator(page.GetByTestId("kiosk-continue")).ToBeVisible())
	var mine []desktop
	if p.API(t, "kiosk3", "GET", "/api/vdi/desktops", &mine); len(mine) != 0 {
		t.Fatalf("following a link from another site claimed %+v; want nothing yet", mine)
	}
	screenshot(t, page, "kiosk-continue")
	must(t, page.GetByTestId("continue").Click())
	must(t, expect.Locator(page.GetByTestId("screen")).ToHaveAttribute("data-connected", "true"))
	if p.API(t, "kiosk3", "GET", "/api/vdi/desktops", &mine); len(mine) != 1 {
		t.Errorf("after pressing the button kiosk3 holds %+v; want one desktop", mine)
	}
}
