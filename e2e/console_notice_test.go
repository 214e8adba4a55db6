package e2e

import (
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsoleUX_NoticeGivesTheKeysBack: a notice over the desktop (here the
// Size choice's: the desktop refused the size the user keeps) takes the
// clicks on its own box only: a click under or beside it reaches the
// desktop. A click on its words takes the keys to the page, as any click
// off the desktop does, and its × gives them back to the desktop: there
// the focus was left on nothing (the × hidden with its notice), and the
// keys typed next went nowhere. Where the screen has room, a panel opened
// at the right (Clipboard) leaves the notice its words and its ×: it lay
// over them.
func TestConsoleUX_NoticeGivesTheKeysBack(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	d := mustClaim(t, p, "alice", "demo")
	// A size past what the screen hub holds: each console page asks the
	// desktop for it, which refuses it, and the page says so in its notice.
	if code := p.APIBody(t, "alice", "PUT", "/api/vdi/settings/size", `{"size": "20000x20000"}`, nil); code != 204 {
		t.Fatalf("keeping alice's size 20000x20000: %d; want 204", code)
	}
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	for _, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			page := uxPage(t, b, s.width, s.height, s.touch)
			defer page.Close()
			probe := watchKeys(page)
			signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			must(t, expect.Locator(page.Locator("#screen canvas")).ToBeVisible())
			notice := page.GetByTestId("size-notice")
			must(t, expect.Locator(notice).ToContainText("The desktop refused 20000×20000"))
			probe.arm(t)
			n := box(t, notice)
			focus := func() string {
				v, err := page.Evaluate(`() => document.activeElement?.dataset.testid || document.activeElement?.tagName`)
				must(t, err)
				got, _ := v.(string)
				return got
			}

			// Under the notice (on the desktop, which a tablet held
			// upright shows below a band) and, where the desktop reaches
			// past it, beside it, level with it.
			c := box(t, page.Locator("#screen canvas"))
			points := [][2]float64{{n.X + n.Width/2, max(n.Y+n.Height, c.Y) + 12}}
			if c.X+c.Width > n.X+n.Width+20 && c.Y < n.Y+n.Height/2 {
				points = append(points, [2]float64{(n.X + n.Width + c.X + c.Width) / 2, n.Y + n.Height/2})
			}
			for _, at := range points {
				pointers := probe.count("PointerEvent")
				must(t, page.Mouse().Click(at[0], at[1]))
				if !eventually(15*time.Second, func() bool { return probe.count("PointerEvent") > pointers }) {
					t.Errorf("a click at %.0f,%.0f, off the notice at %+v, sent the desktop nothing: %s", at[0], at[1], *n, probe.report(at[:]))
				}
				if f := focus(); f != "console-ime" {
					t.Errorf("after a click at %.0f,%.0f, off the notice, the focus is on %s; want the desktop's keys (console-ime)", at[0], at[1], f)
				}
			}

			// A panel at the right leaves the notice its room.
			if s.width >= 704 {
				openControl(t, page, "clipboard-toggle")
				panel := page.GetByTestId("clipboard-panel")
				must(t, expect.Locator(panel).ToBeVisible())
				beside, pb := box(t, notice), box(t, panel)
				if beside.X+beside.Width > pb.X && beside.Y < pb.Y+pb.Height && pb.Y < beside.Y+beside.Height {
					t.Errorf("the notice at %+v lies under the Clipboard panel at %+v; want them side by side", *beside, *pb)
				}
				screenshot(t, page, "notice-beside-panel")
				must(t, page.GetByTestId("clipboard-close").Click())
				must(t, expect.Locator(panel).ToBeHidden())
			}

			// On its words, then its ×.
			must(t, page.Mouse().Click(n.X+8, n.Y+n.Height/2))
			if f := focus(); f == "console-ime" {
				t.Fatalf("a click on the notice's words left the focus on the desktop's keys; want it on the page, as any click off the desktop")
			}
			must(t, page.GetByTestId("size-notice-dismiss").Click())
			must(t, expect.Locator(notice).ToBeHidden())
			// noVNC sends a key as QEMU's extended key event where the
			// server takes them (Xvnc does), else as a KeyEvent.
			keyEvents := func() int { return probe.count("KeyEvent") + probe.count("QEMU") }
			keys := keyEvents()
			must(t, page.Keyboard().Type("ok"))
			if !eventually(15*time.Second, func() bool { return keyEvents() >= keys+4 }) {
				t.Errorf("after the notice's ×, 2 keys typed sent %d key events; want 4 (down, up): %s", keyEvents()-keys, probe.report([]float64{n.X + n.Width - 8, n.Y + n.Height/2}))
			}
			screenshot(t, page, "notice-dismissed")
		})
	}
}
