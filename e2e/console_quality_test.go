package e2e

import (
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// vncQualityState reads the VNC console's picture choice: the select's
// value, what the console resolved it to and the levels noVNC sends.
const vncQualityState = `() => {
  const rfb = document.getElementById('screen').rfb;
  return [document.getElementById('vnc-quality').value, rfb.quality, rfb.qualityLevel, rfb.compressionLevel].join(' ');
}`

// mustVNCDesktop starts a portal with one claimed local desktop for alice
// and returns the portal and the member.
func mustVNCDesktop(t *testing.T) (*Portal, string) {
	t.Helper()
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "q", "size": 1}`, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	d := mustClaim(t, p, "alice", "q")
	return p, d.Name
}

// waitQuality waits until the console's picture state is want.
func waitQuality(t *testing.T, page playwright.Page, want ...string) {
	t.Helper()
	var got any
	if !eventually(15*time.Second, func() bool {
		var err error
		got, err = page.Evaluate(vncQualityState)
		s, _ := got.(string)
		return err == nil && slices.Contains(want, s)
	}) {
		t.Fatalf("VNC picture (select, resolved, quality, compression) = %v; want one of %q", got, want)
	}
}

// TestConsole_VNCQuality: the VNC console's Picture choice defaults to
// Auto, which is Sharp on loopback; Fast applies at once and the browser
// remembers it across a reload.
func TestConsole_VNCQuality(t *testing.T) {
	p, member := mustVNCDesktop(t)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	signIn(t, page, p, "alice", "/desktops/local/"+member+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(page.GetByTestId("vnc-quality")).ToBeVisible())
	waitQuality(t, page, "auto sharp 8 2")
	// The choice's words stay short for the bar; what Auto picked and the
	// measured round trip are in its title.
	must(t, expect.Locator(page.Locator("#vnc-quality option[value=auto]")).ToHaveText("Auto"))
	must(t, expect.Locator(page.GetByTestId("vnc-quality")).ToHaveAttribute("title", regexp.MustCompile(`^VNC picture: Auto \(sharp\) .*\(\d+ ms now\)$`)))
	_, err := page.GetByTestId("vnc-quality").SelectOption(playwright.SelectOptionValues{Values: &[]string{"fast"}})
	must(t, err)
	waitQuality(t, page, "fast fast 3 9")
	_, err = page.Reload()
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	waitQuality(t, page, "fast fast 3 9")
	screenshot(t, page, "vnc-quality")
}

// TestConsole_VNCQualityAutoRemeasures forces a first round trip that a
// busy moment made long: the page's first three /healthz answers are held
// 60 ms, so Auto starts Fast; its next measures, 3 and 10 s on, see
// loopback and turn it Sharp.
func TestConsole_VNCQualityAutoRemeasures(t *testing.T) {
	p, member := mustVNCDesktop(t)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	var mu sync.Mutex
	held := 0
	must(t, page.Route("**/healthz", func(r playwright.Route) {
		mu.Lock()
		slow := held < 3
		held++
		mu.Unlock()
		if slow {
			time.Sleep(60 * time.Millisecond)
		}
		r.Continue()
	}))
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	signIn(t, page, p, "alice", "/desktops/local/"+member+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	waitQuality(t, page, "auto fast 3 2")
	// The later measures go straight to the portal: a route's every
	// answer passes through the test's driver, which on a loaded machine
	// alone takes longer than a WAN's round trip.
	must(t, page.Unroute("**/healthz"))
	waitQuality(t, page, "auto sharp 8 2")
}
