package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// altTabSecond is the title of the window altTabFromKeys opens.
const altTabSecond = "alt-tab-second"

// altTabFromKeys opens a second window on a local desktop (openbox gives
// it the focus) and picks Alt+Tab in the console's Keys menu, twice:
// openbox's own Alt+Tab (NextWindow, ended when Alt is let go) gives the
// focus to the other window, then back (the menu lets Alt go before Tab,
// console-vnc.js says why). The focused window is read in
// the desktop (the root's _NET_ACTIVE_WINDOW); the desktops have no
// xdotool.
func altTabFromKeys(t *testing.T, page playwright.Page, shell *guestShell) {
	t.Helper()
	// Not a shell in it: a prompt could retitle the window.
	pid := strings.TrimSpace(lastLine(strings.ReplaceAll(shell.run("xterm -geometry 40x6+300+300 -title "+altTabSecond+" -e sleep 600 >/dev/null 2>&1 & echo; echo $!"), "\r", "")))
	t.Cleanup(func() { shell.run("kill " + pid) })
	var second string
	if !eventually(15*time.Second, func() bool {
		m := winIDRe.FindStringSubmatch(shell.run("xwininfo -name " + altTabSecond))
		if m != nil {
			second = m[1]
		}
		return m != nil && activeWindow(shell) == second
	}) {
		t.Fatalf("openbox did not focus the new window %s (%s); the focused window is %s", altTabSecond, second, activeWindow(shell))
	}
	first := ""
	for i, away := range []bool{true, false} {
		openControl(t, page, "keys-menu")
		if i == 0 {
			screenshot(t, page, "keys-menu-alt-tab")
		}
		must(t, page.GetByTestId("key-alt-tab").Click())
		closeMenu(t, page)
		want := second
		if away {
			want = "another window than " + second
		}
		var got string
		if !eventually(15*time.Second, func() bool {
			got = activeWindow(shell)
			if away {
				return got != second && got != "" && got != "0x0"
			}
			return got == second
		}) {
			t.Fatalf("after Alt+Tab %d from the Keys menu the desktop's focused window is %q; want %s (the first Alt+Tab focused %q)", i+1, got, want, first)
		}
		if away {
			first = got
			t.Logf("Alt+Tab focused %s: %s", got, strings.TrimSpace(lastLine(strings.ReplaceAll(shell.run("echo; xprop -id "+got+" WM_CLASS"), "\r", ""))))
		}
	}
}

// activeWindow returns the id of the desktop's focused window (openbox's
// _NET_ACTIVE_WINDOW on the root), or "" if none is set.
func activeWindow(shell *guestShell) string {
	m := activeRe.FindStringSubmatch(shell.run("xprop -root _NET_ACTIVE_WINDOW"))
	if m == nil {
		return ""
	}
	return m[1]
}
