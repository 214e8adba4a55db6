package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// issueSizes are the screens issue 58 asks for: a laptop, a tablet in
// portrait and a phone.
var issueSizes = []struct {
	name          string
	width, height int
	touch         bool
}{{"laptop", 1280, 800, false}, {"tablet", 1024, 1366, true}, {"phone", 390, 844, true}}

// TestConsoleUX_EndedCardOverTheLastFrame: issue 58, item 7, for the RDP
// and terminal consoles (VNC: TestConsoleDown_CrashedDesktopHasAWayBack).
// When an admin releases the desktop under an open console, the ended
// card lies over the console's last frame, dimmed, not over black: the
// RDP canvas still shows the desktop, the terminal still shows what was
// typed.
func TestConsoleUX_EndedCardOverTheLastFrame(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=6", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	// IronRDP compiles its wasm first: seconds on a busy machine.
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000))
	dimmed := func(t *testing.T, page playwright.Page, sel string) {
		t.Helper()
		must(t, expect.Locator(page.GetByTestId("ended-title")).ToHaveText("This desktop is no longer yours"))
		must(t, expect.Locator(page.Locator(sel).First()).ToBeVisible())
		v, err := page.Locator(sel).First().Evaluate(`(e) => getComputedStyle(e).filter`, nil)
		must(t, err)
		if f, _ := v.(string); !strings.Contains(f, "brightness") {
			t.Errorf("the ended console's %s has filter %q; want it dimmed", sel, f)
		}
	}
	for _, s := range issueSizes {
		t.Run("terminal/"+s.name, func(t *testing.T) {
			user := "tess-" + s.name
			d := mustClaim(t, p, user, "demo")
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, user, "/desktops/local/"+d.Name+"?protocol=terminal")
			must(t, expect.Locator(page.GetByTestId("status")).ToContainText("Connected"))
			must(t, page.Locator("#screen .xterm").Click())
			must(t, page.Keyboard().Type("echo last-frame-$((6*7))\n"))
			const shown = `() => { const b = document.getElementById('screen').xterm.buffer.active; let s = ''; for (let i = 0; i < b.length; i++) s += b.getLine(i).translateToString() + '\n'; return s; }`
			if !eventually(20*time.Second, func() bool {
				v, err := page.Evaluate(shown)
				return err == nil && strings.Contains(v.(string), "last-frame-42")
			}) {
				t.Fatal("the terminal never showed the echo")
			}
			release(t, p, d.Name)
			dimmed(t, page, "#screen .xterm")
			if text, err := page.Locator("#screen .xterm-rows").InnerText(); err != nil || !strings.Contains(text, "last-frame-42") {
				t.Errorf("under the ended card the terminal shows %q (%v); want its last screen", text, err)
			}
			screenshot(t, page, "ended")
		})
	}
	for _, s := range issueSizes {
		t.Run("rdp/"+s.name, func(t *testing.T) {
			user := "rita-" + s.name
			d := mustClaim(t, p, user, "demo")
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, user, "/desktops/local/"+d.Name+"?protocol=rdp")
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			desk := page.Locator("iron-remote-desktop")
			drawn := func() bool {
				shot, err := desk.Screenshot()
				return err == nil && rdpColours(t, shot) > 20
			}
			if !eventually(20*time.Second, drawn) {
				t.Fatal("IronRDP never drew the desktop")
			}
			release(t, p, d.Name)
			dimmed(t, page, "iron-remote-desktop")
			// The desktop's own colours, not the card's: the card steps aside.
			_, err := page.GetByTestId("ended").Evaluate(`(e) => { e.style.visibility = 'hidden'; }`, nil)
			must(t, err)
			shown := drawn()
			_, err = page.GetByTestId("ended").Evaluate(`(e) => { e.style.visibility = ''; }`, nil)
			must(t, err)
			if !shown {
				t.Errorf("under the ended card the RDP console is blank; want its last frame")
			}
			screenshot(t, page, "ended")
		})
	}
}

// release force-releases member as an admin would.
func release(t *testing.T, p *Portal, member string) {
	t.Helper()
	if code := p.APIBody(t, "boss", "POST", "/api/vdi/desktops/local/"+member+"/release", `{"reason":"end of term"}`, nil); code != 200 {
		t.Fatalf("force-release: %d", code)
	}
}
