package e2e

import (
	"math"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestWatch_ViewOnlyAsksNoSize: a viewer beside the holder (an admin
// watching, view only, on the watch page and on the desktop's console
// page) leaves the desktop's size to the holder: whatever its window's
// size, its page asks the desktop for none (no SetDesktopSize; the screen
// hub would refuse it, status 1) and offers no Size choice, and its view
// scales the holder's desktop instead. The holder's own page, resized the
// same way, does ask.
func TestWatch_ViewOnlyAsksNoSize(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	d := mustClaim(t, p, "alice", "demo")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	for _, c := range []struct {
		name, user, path string
		asks             bool
	}{
		{"WatchPage", "ops", "/admin/shadow/local/" + d.Name, false},
		{"AdminOnTheConsolePage", "ops", "/desktops/local/" + d.Name, false},
		{"Holder", "alice", "/desktops/local/" + d.Name, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			page := b.MustNewPage(t, 1280, 800)
			defer page.Close()
			probe := watchKeys(page)
			signIn(t, page, p, c.user, c.path)
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			canvas := page.Locator("#screen canvas")
			must(t, expect.Locator(canvas).ToBeVisible())
			for _, w := range []int{900, 1280} {
				before := box(t, canvas).Width
				must(t, page.SetViewportSize(w, 700))
				// The view follows the window in the same step as a
				// request for the window's size would go.
				if !eventually(30*time.Second, func() bool {
					b, err := canvas.BoundingBox()
					return err == nil && math.Abs(b.Width-before) > 20 && b.X+b.Width <= float64(w)+1
				}) {
					t.Fatalf("the desktop's view at %+v (%.0f px wide before) does not follow a %d px window", *box(t, canvas), before, w)
				}
			}
			if c.asks {
				if !eventually(30*time.Second, func() bool { return probe.count("SetDesktopSize") > 0 }) {
					t.Errorf("the holder's page asked the desktop for no size as its window changed: %s", probe.report([]float64{0, 0}))
				}
				return
			}
			time.Sleep(time.Second) // the frames sent reach the probe
			if n := probe.count("SetDesktopSize"); n != 0 {
				t.Errorf("the view-only page asked the desktop for a size %d times as its window changed; want none (only the holder sets it)", n)
			}
			if v, _ := page.GetByTestId("size-menu").IsVisible(); v {
				t.Error("the view-only page offers a Size choice; want none (only the holder sets the size)")
			}
		})
	}
}
