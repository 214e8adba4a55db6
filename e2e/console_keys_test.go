package e2e

import (
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 58, item 5: a keyboard user is never trapped. In a normal window
// Ctrl+Alt+Shift takes the keyboard out of the desktop to the bar's
// controls and Esc gives it back; Esc closes the Clipboard, Share and Keys
// panels, the focus back on the control that opened them.
func TestConsoleKeys_NoTrapAndEscCloses(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=3")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	focused := func(page playwright.Page) string {
		v, _ := page.Evaluate(`() => document.activeElement?.closest('#screen') ? 'screen' : (document.activeElement?.dataset?.testid || document.activeElement?.id || '')`)
		s, _ := v.(string)
		return s
	}
	for _, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			page, _ := MustOpenConsole(t, b, p, "kay-"+s.name, "demo", s.width, s.height, s.touch)
			if !s.touch {
				must(t, page.Locator("#screen canvas").Click()) // typing into the desktop
				if f := focused(page); f != "screen" {
					t.Fatalf("after a click on the desktop the focus is on %q", f)
				}
				must(t, page.Keyboard().Press("Control+Alt+Shift"))
				if f := focused(page); f == "screen" || f == "" {
					t.Fatalf("Ctrl+Alt+Shift in a window left the focus on %q; want a control of the bar", f)
				}
				screenshot(t, page, "keyboard-out")
				must(t, page.Keyboard().Press("Escape"))
				if f := focused(page); f != "screen" {
					t.Errorf("Esc from the bar gave the focus to %q; want the desktop", f)
				}
			}
			for _, c := range []struct{ toggle, panel string }{
				{"clipboard-toggle", "clipboard-panel"},
				{"share-toggle", "share-panel"},
				{"keys-menu", "keys-list"},
			} {
				openControl(t, page, c.toggle)
				must(t, expect.Locator(page.GetByTestId(c.panel)).ToBeVisible())
				must(t, page.Keyboard().Press("Escape"))
				must(t, expect.Locator(page.GetByTestId(c.panel)).ToBeHidden())
				if f := focused(page); !s.touch && f != c.toggle {
					t.Errorf("after Esc closed %s the focus is on %q; want %s", c.panel, f, c.toggle)
				}
			}
			closeMenu(t, page) // the folded bar's, again
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		})
	}
}

// TestConsoleKeys_TypingToggle: the bar's Typing toggle, shown once the
// user moves by keyboard, says where keys go and switches it, by pointer
// and by keyboard, at every size: pressed,
// it says the other; a keyboard user tabs to it and presses Enter, and
// what they type then runs in the desktop's terminal; Ctrl+Alt+Shift
// takes the keys to the page, and it says so.
func TestConsoleKeys_TypingToggle(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=3")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	other := map[string]string{"Typing: desktop": "Typing: page", "Typing: page": "Typing: desktop"}
	for i, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			page, d := MustOpenConsole(t, b, p, "tia-"+s.name, "demo", s.width, s.height, s.touch)
			_, err := page.Goto(p.URL + "/desktops/local/" + d.Name + "?protocol=terminal")
			must(t, err)
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText(regexp.MustCompile(`^Connected`)))
			toggle := page.GetByTestId("typing")
			must(t, expect.Locator(toggle).ToBeHidden()) // a pointer user's bar keeps its room
			must(t, page.Keyboard().Press("Tab"))        // a keyboard user's shows where keys go
			must(t, expect.Locator(toggle).ToBeVisible())
			must(t, page.Locator("#screen").Click())
			must(t, expect.Locator(toggle).ToHaveAttribute("aria-label", "Typing: desktop"))
			must(t, expect.Locator(toggle).ToHaveAttribute("aria-pressed", "true"))
			for range 2 {
				before, err := toggle.GetAttribute("aria-label")
				must(t, err)
				must(t, toggle.Click())
				must(t, expect.Locator(toggle).ToHaveAttribute("aria-label", other[before]))
			}
			screenshot(t, page, "typing-toggle")
			if !s.touch {
				must(t, page.Locator("#screen").Click())
				must(t, expect.Locator(toggle).ToHaveAttribute("aria-label", "Typing: desktop"))
				must(t, page.Keyboard().Press("Control+Alt+Shift"))
				must(t, expect.Locator(toggle).ToHaveAttribute("aria-label", "Typing: page"))
			}
			// By keyboard: the focus on the toggle, Enter, then type.
			must(t, toggle.Focus())
			must(t, expect.Locator(toggle).ToHaveAttribute("aria-label", "Typing: page"))
			must(t, page.Keyboard().Press("Enter"))
			must(t, expect.Locator(toggle).ToHaveAttribute("aria-label", "Typing: desktop"))
			must(t, page.Keyboard().Type(fmt.Sprintf("echo typed-$((%d*7))\n", i+6)))
			waitXterm(t, page, regexp.MustCompile(fmt.Sprintf(`(?m)^typed-%d$`, (i+6)*7)), 10*time.Second)
		})
	}
}
