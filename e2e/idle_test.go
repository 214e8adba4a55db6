package e2e

import (
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// idleDeadline returns when user's desktop member is due for idle reclaim.
func idleDeadline(t *testing.T, p *Portal, user, member string) time.Time {
	t.Helper()
	var d struct {
		Reclaim struct {
			Rule string    `json:"rule"`
			At   time.Time `json:"at"`
		} `json:"reclaim"`
	}
	if code := p.API(t, user, "GET", "/api/vdi/desktops/local/"+member, &d); code != 200 || d.Reclaim.Rule != "idle" {
		t.Fatalf("desktop %s: %d, next reclaim %+v; want an idle deadline", member, code, d.Reclaim)
	}
	return d.Reclaim.At
}

// TestIdle_IronRDPInputMovesTheDeadline: an RDP console that only draws
// frames does not count as activity; moving the mouse in IronRDP does.
func TestIdle_IronRDPInputMovesTheDeadline(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_IDLE_TIMEOUT=10m")
	page := MustLaunchBrowser(t).MustNewPage(t, 1024, 700)
	member := rdpSignIn(t, p, page, "alice")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(45000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))

	before := idleDeadline(t, p, "alice", member)
	time.Sleep(8 * time.Second) // frames flow; the portal flushes input every 5 s
	if got := idleDeadline(t, p, "alice", member); !got.Equal(before) {
		t.Fatalf("idle deadline moved from %v to %v with no user input: frames were taken for activity", before, got)
	}
	box, err := page.Locator("#screen canvas").First().BoundingBox()
	must(t, err)
	moved := eventually(15*time.Second, func() bool {
		must(t, page.Mouse().Move(box.X+box.Width/3, box.Y+box.Height/3))
		must(t, page.Mouse().Move(box.X+box.Width/2, box.Y+box.Height/2))
		return idleDeadline(t, p, "alice", member).After(before)
	})
	if !moved {
		t.Fatal("moving the mouse in IronRDP did not move the idle deadline")
	}
}
