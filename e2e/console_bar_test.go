package e2e

import (
	"regexp"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 58, items 2 and 4: the console bar fits every screen. The
// connection chip is a dot at every width, its figures a tap away; the
// status reads whole; the picture choice is not cut and says what it is; and the controls fold
// into Menu exactly when they do not fit (a tablet in portrait, whose
// touch-only Keyboard button widens the bar), so the page never scrolls
// sideways and Release is always reachable.
func TestConsoleBar_FitsEveryScreen(t *testing.T) {
	sizes := []struct {
		name          string
		width, height int
		touch         bool
	}{
		{"desktop-1920", 1920, 1080, false},
		{"desktop-1600", 1600, 900, false},
		{"laptop", 1280, 800, false},
		{"tablet-landscape", 1366, 1024, true},
		{"tablet-portrait", 1024, 1366, true},
		{"tablet-small", 768, 1024, true},
		{"phone", 390, 844, true},
	}
	// One desktop, its console opened afresh at each size: the bar shows
	// the desktop's name, never the user's, and a desktop of its own per
	// size cost a desktop's start each (a quarter of the test's CPU).
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	for _, s := range sizes {
		t.Run(s.name, func(t *testing.T) {
			page, _ := MustOpenConsole(t, b, p, "fay", "demo", s.width, s.height, s.touch)
			must(t, expect.Locator(page.GetByTestId("connection-chip")).ToBeVisible())
			must(t, expect.Locator(page.GetByTestId("vnc-quality")).ToHaveValue(regexp.MustCompile(`.`)))
			noOverflow(t, page)
			if h := barHeight(t, page); h > 60 {
				t.Errorf("the console bar is %.0f px high: it wrapped", h)
			}
			folded := openMenu(t, page)
			cut, err := page.Evaluate(`() => { const st = document.getElementById('status'); return st.scrollWidth > st.clientWidth + 1; }`)
			must(t, err)
			if cut == true {
				t.Errorf("the status is cut: %q", mustText(t, page.GetByTestId("status")))
			}
			over, err := page.Evaluate(pictureNarrow)
			must(t, err)
			if over := toFloat(over); over > 0 {
				t.Errorf("the picture choice is %.0f px too narrow for %q", over, mustInputText(t, page))
			}
			inViewport(t, page, page.GetByTestId("release"), "Release", s.width)
			// In the menu, links that look like buttons (Use RDP) line up
			// with the buttons. What is checked is the bar as it is now,
			// folded or not, not as openMenu found it: a scaled desktop's
			// Zoom button may have gone meanwhile and unfolded it.
			pads, err := page.Evaluate(`() => {
				if (document.body.dataset.fold !== 'true') return '';
				const pads = {};
				for (const e of document.querySelectorAll('.console-controls :is(button, .button)')) {
					if (e.offsetParent && !e.classList.contains('link')) pads[getComputedStyle(e).paddingLeft] = e.textContent.trim();
				}
				return Object.keys(pads).length > 1 ? JSON.stringify(pads) : '';
			}`)
			must(t, err)
			if pads != "" {
				t.Errorf("the controls' text does not line up (left padding: a control with it): %v", pads)
			}
			// In the bar and in the menu the picture choice is not a bare
			// "Auto": its name shows beside it (but in a compact bar, which
			// drops words before it folds), and names it for a reader.
			word, err := page.Evaluate(`() => {
				const b = document.body.dataset;
				return b.fold === 'true' || b.compact !== 'true' ? document.querySelector('.vnc-quality .vnc-quality-name').getBoundingClientRect().width : 100;
			}`)
			must(t, err)
			if toFloat(word) < 20 {
				t.Errorf("the picture choice has no visible name (%.0f px wide): it reads %q", toFloat(word), mustInputText(t, page))
			}
			must(t, expect.Locator(page.GetByRole("combobox", playwright.PageGetByRoleOptions{Name: "Picture"})).ToBeVisible())
			screenshot(t, page, "bar")
			closeMenu(t, page)
			t.Logf("%s: folded %v", s.name, folded)
			if want := s.width < 900; folded != want && (s.width < 900 || s.width >= 1280) {
				t.Errorf("folded = %v at %d px; want %v", folded, s.width, want)
			}
			// The chip's figures, a tap or a click away.
			must(t, page.GetByTestId("connection-chip").Click())
			must(t, expect.Locator(page.GetByTestId("chip-details")).ToBeVisible())
			must(t, expect.Locator(page.GetByTestId("chip-details")).ToHaveText(regexp.MustCompile(`^direct · \d+ ms · \d+ updates/s`)))
			inViewport(t, page, page.GetByTestId("chip-details"), "the chip's details", s.width)
			screenshot(t, page, "chip")
			must(t, page.GetByTestId("connection-chip").Click())
			must(t, expect.Locator(page.GetByTestId("chip-details")).ToBeHidden())
		})
	}
}

func mustText(t *testing.T, l playwright.Locator) string {
	t.Helper()
	s, err := l.InnerText()
	must(t, err)
	return s
}

func mustInputText(t *testing.T, page playwright.Page) string {
	t.Helper()
	v, err := page.Evaluate(`() => document.getElementById('vnc-quality').selectedOptions[0].textContent`)
	must(t, err)
	s, _ := v.(string)
	return s
}
