package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// closeSizeList closes the Size list (and the folded bar's Menu).
func closeSizeList(t *testing.T, page playwright.Page) {
	t.Helper()
	must(t, page.GetByTestId("size-menu").Click())
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(10000)).Locator(page.GetByTestId("size-list")).ToBeHidden())
	closeMenu(t, page)
}

// addScreen clicks Add a screen in page's Size list and returns the
// screen window it opened, at w x h, once its console is connected.
func addScreen(t *testing.T, page playwright.Page, w, h int) playwright.Page {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	openControl(t, page, "size-menu")
	win, err := page.ExpectPopup(func() error { return page.GetByTestId("screen-add").Click() })
	must(t, err)
	must(t, win.SetViewportSize(w, h))
	must(t, expect.Locator(win.GetByTestId("status")).ToHaveText("Connected"))
	closeSizeList(t, page)
	return win
}

// wholeSize returns the console's screen element size in whole pixels,
// as the console asks the desktop for it.
func wholeSize(t *testing.T, page playwright.Page) (int, int) {
	t.Helper()
	v, err := page.Evaluate(`() => { const r = document.getElementById('screen').getBoundingClientRect(); return [Math.floor(r.width), Math.floor(r.height)]; }`)
	must(t, err)
	a := v.([]any)
	return toInt(a[0]), toInt(a[1])
}

// maximiseOn opens an xterm titled title at x, y on the desktop and
// double-clicks its title bar (openbox maximises it) through page, the
// window that shows the screen whose left edge is at left; it returns the
// xterm's geometry then (x, width), and kills it at the end of the test.
func maximiseOn(t *testing.T, page playwright.Page, shell *guestShell, title string, x, y, left int) (int, int) {
	t.Helper()
	pid := strings.TrimSpace(lastLine(strings.ReplaceAll(shell.run(fmt.Sprintf("xterm -geometry 40x6+%d+%d -title %s >/dev/null 2>&1 & echo; echo $!", x, y, title)), "\r", "")))
	t.Cleanup(func() { shell.run("kill " + pid) })
	// Once openbox manages it, the window has a frame (its extents set)
	// and the client sits below its title bar.
	var top int
	if !eventually(15*time.Second, func() bool {
		var l, r, b int
		_, err := fmt.Sscanf(lastLine(strings.ReplaceAll(shell.run("echo; xprop -name "+title+" _NET_FRAME_EXTENTS | tr -d ' ' | cut -d= -f2"), "\r", "")), "%d,%d,%d,%d", &l, &r, &top, &b)
		return err == nil && top > 0
	}) {
		t.Fatalf("openbox did not frame the window %s", title)
	}
	m := winPosRe.FindStringSubmatch(shell.run("xwininfo -name " + title))
	if m == nil {
		t.Fatalf("no window %s on the desktop", title)
	}
	cx, cy := atoi(m[1]), atoi(m[2])
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	mouse := page.Mouse()
	must(t, mouse.Move(box.X+float64(cx-left+80), box.Y+float64(cy-top/2)))
	for range 2 {
		must(t, mouse.Down())
		must(t, mouse.Up())
	}
	var gx, gw int
	eventually(15*time.Second, func() bool {
		m = winPosRe.FindStringSubmatch(shell.run("xwininfo -name " + title))
		if m == nil {
			return false
		}
		gx, gw = atoi(m[1]), atoi(m[3])
		return gw > 400
	})
	return gx, gw
}

// shown waits until page's noVNC has the desktop at w x h, as the
// desktop's server said it to xdpyinfo first.
func shown(t *testing.T, page playwright.Page, w, h int) {
	t.Helper()
	_, err := page.WaitForFunction(`([w, h]) => { const r = document.getElementById('screen').rfb;
		return r && r._fbWidth === w && r._fbHeight === h; }`, []int{w, h})
	must(t, err)
}

// drawnEmpty waits until page's canvas shows an empty screen drawn
// whole: its bottom-left and bottom-right corners the colour of its
// top-left one, the desktop's background, not a canvas never drawn on.
func drawnEmpty(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.WaitForFunction(`() => { const c = document.querySelector('#screen canvas');
		const px = (x, y) => [...c.getContext('2d').getImageData(x, y, 1, 1).data].join();
		const bg = px(2, 2);
		return bg !== '0,0,0,255' && bg !== '0,0,0,0' && px(2, c.height - 3) === bg && px(c.width - 3, c.height - 3) === bg; }`, nil)
	must(t, err)
}

// screensOf reads the desktop's RandR monitors: "w h x y" each.
func screensOf(t *testing.T, shell *guestShell) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(shell.run("xrandr --listmonitors"), "\n") {
		f := strings.Fields(strings.ReplaceAll(l, "\r", ""))
		if len(f) < 3 || !strings.HasSuffix(f[0], ":") {
			continue
		}
		var w, h, x, y, mw, mh int
		if _, err := fmt.Sscanf(f[2], "%d/%dx%d/%d+%d+%d", &w, &mw, &h, &mh, &x, &y); err == nil {
			out = append(out, fmt.Sprintf("%d %d %d %d", w, h, x, y))
		}
	}
	return out
}

// twoScreens drives the holder's console on more than one screen: Add a
// screen opens a second browser window that becomes a second RandR
// output of the desktop's Xvnc, right of the first (or left, as the
// window chooses), each the size of its window; a window double-clicked through each maximises on that screen
// only; the pointer goes where the window that has it points; a third
// screen is the last (the portal refuses a fourth: screenAttacks);
// closing a screen window folds its screen away. Both windows are
// screenshotted, the screen window at the issue's three sizes.
func twoScreens(t *testing.T, page playwright.Page, shell *guestShell) {
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	var second playwright.Page
	var w1, h1, w2, h2 int
	t.Run("a second window is a second screen", func(t *testing.T) {
		openControl(t, page, "size-menu")
		must(t, expect.Locator(page.GetByTestId("screen-words")).ToContainText("as a second monitor"))
		closeSizeList(t, page)
		second = addScreen(t, page, 1000, 700)
		must(t, expect.Locator(second.GetByTestId("screen-badge")).ToHaveText("Screen 2"))
		w1, h1 = wholeSize(t, page)
		w2, h2 = wholeSize(t, second)
		waitDimensions(t, shell, fmt.Sprintf("%dx%d", w1+w2, max(h1, h2)))
		want := []string{fmt.Sprintf("%d %d 0 0", w1, h1), fmt.Sprintf("%d %d %d 0", w2, h2, w1)}
		if got := screensOf(t, shell); strings.Join(got, ";") != strings.Join(want, ";") {
			t.Errorf("xrandr's monitors are %q; want %q", got, want)
		}
		// Beside, not instead: the console's own window keeps its desktop.
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		openControl(t, page, "size-menu")
		must(t, expect.Locator(page.GetByTestId("size-note")).ToContainText("over 2 screens"))
		must(t, expect.Locator(page.GetByTestId("size-1280x720")).ToBeDisabled())
		closeSizeList(t, page)
	})
	if second == nil {
		t.Fatal("no second screen")
	}
	t.Run("a window maximised on each screen", func(t *testing.T) {
		x, w := maximiseOn(t, second, shell, "screen2", w1+120, 140, w1)
		if x < w1 || x > w1+4 || w < w2-8 || w > w2 {
			t.Errorf("maximised on screen 2 the window is %d px wide at x %d; want about %d at %d", w, x, w2, w1)
		}
		x, w = maximiseOn(t, page, shell, "screen1", 160, 160, 0)
		if x > 4 || w < w1-8 || w > w1 {
			t.Errorf("maximised on screen 1 the window is %d px wide at x %d; want about %d at 0", w, x, w1)
		}
		shown(t, page, w1+w2, max(h1, h2))
		shown(t, second, w1+w2, max(h1, h2))
		screenshot(t, page, "screens-1")
		screenshot(t, second, "screens-2")
	})
	t.Run("the screen window at three sizes", func(t *testing.T) {
		for _, size := range issueSizes {
			must(t, second.SetViewportSize(size.width, size.height))
			w, h := 0, 0
			if !eventually(15*time.Second, func() bool {
				w, h = wholeSize(t, second)
				return shell.dimensions() == fmt.Sprintf("%dx%d", w1+w, max(h1, h))
			}) {
				t.Errorf("a %s screen window: the desktop is %s; want %dx%d", size.name, shell.dimensions(), w1+w, max(h1, h))
			}
			shown(t, second, w1+w, max(h1, h))
			drawnEmpty(t, second)
			must(t, expect.Locator(second.GetByTestId("screen-badge")).ToBeVisible())
			noOverflow(t, second)
			screenshot(t, second, "screen-window-"+size.name)
		}
		must(t, second.SetViewportSize(1000, 700))
		waitDimensions(t, shell, fmt.Sprintf("%dx%d", w1+w2, max(h1, h2)))
		// The screen window has the desktop's new size too before the
		// pointer is moved over it (a move while it still maps to the last
		// size lands elsewhere, as in any VNC client mid-resize).
		shown(t, second, w1+w2, max(h1, h2))
	})
	t.Run("the pointer follows the window", func(t *testing.T) {
		must(t, second.Locator("#screen canvas").Hover(playwright.LocatorHoverOptions{Position: &playwright.Position{X: 300, Y: 200}}))
		// Within a pixel: the canvas may start a fraction of one below the bar.
		if !eventually(10*time.Second, func() bool { x, y := shell.pointer(); return abs(x-(w1+300)) <= 1 && abs(y-200) <= 1 }) {
			x, y := shell.pointer()
			t.Errorf("the pointer is at %d,%d; want %d,200 (screen 2's 300,200)", x, y, w1+300)
		}
		must(t, page.Locator("#screen canvas").Hover(playwright.LocatorHoverOptions{Position: &playwright.Position{X: 50, Y: 60}}))
		if !eventually(10*time.Second, func() bool { x, y := shell.pointer(); return abs(x-50) <= 1 && abs(y-60) <= 1 }) {
			x, y := shell.pointer()
			t.Errorf("the pointer is at %d,%d; want 50,60", x, y)
		}
	})
	t.Run("a screen left of the first", func(t *testing.T) {
		// The monitor stands left of the first: the second window says so
		// and its screen goes left of the console's, whose window then
		// shows its own part (from x = w2), pointer and all.
		_, err := second.GetByTestId("screen-side").SelectOption(playwright.SelectOptionValues{Values: &[]string{"left"}})
		must(t, err)
		want := []string{fmt.Sprintf("%d %d %d 0", w1, h1, w2), fmt.Sprintf("%d %d 0 0", w2, h2)}
		var got []string
		if !eventually(15*time.Second, func() bool { got = screensOf(t, shell); return strings.Join(got, ";") == strings.Join(want, ";") }) {
			t.Errorf("xrandr's monitors are %q; want %q", got, want)
		}
		must(t, page.Locator("#screen canvas").Hover(playwright.LocatorHoverOptions{Position: &playwright.Position{X: 50, Y: 60}}))
		if !eventually(10*time.Second, func() bool { x, y := shell.pointer(); return abs(x-(w2+50)) <= 1 && abs(y-60) <= 1 }) {
			x, y := shell.pointer()
			t.Errorf("the pointer is at %d,%d; want %d,60 (screen 1's 50,60)", x, y, w2+50)
		}
		must(t, second.Locator("#screen canvas").Hover(playwright.LocatorHoverOptions{Position: &playwright.Position{X: 300, Y: 200}}))
		if !eventually(10*time.Second, func() bool { x, y := shell.pointer(); return abs(x-300) <= 1 && abs(y-200) <= 1 }) {
			x, y := shell.pointer()
			t.Errorf("the pointer is at %d,%d; want 300,200 (screen 2's 300,200)", x, y)
		}
		screenshot(t, page, "screens-left-1")
		screenshot(t, second, "screens-left-2")
		_, err = second.GetByTestId("screen-side").SelectOption(playwright.SelectOptionValues{Values: &[]string{"right"}})
		must(t, err)
		want = []string{fmt.Sprintf("%d %d 0 0", w1, h1), fmt.Sprintf("%d %d %d 0", w2, h2, w1)}
		if !eventually(15*time.Second, func() bool { got = screensOf(t, shell); return strings.Join(got, ";") == strings.Join(want, ";") }) {
			t.Errorf("back to the right, xrandr's monitors are %q; want %q", got, want)
		}
	})
	t.Run("three screens at most", func(t *testing.T) {
		third := addScreen(t, page, 800, 600)
		must(t, expect.Locator(third.GetByTestId("screen-badge")).ToHaveText("Screen 3"))
		w3, h3 := wholeSize(t, third)
		waitDimensions(t, shell, fmt.Sprintf("%dx%d", w1+w2+w3, max(h1, h2, h3)))
		openControl(t, page, "size-menu")
		must(t, expect.Locator(page.GetByTestId("screen-add")).ToBeDisabled())
		must(t, expect.Locator(page.GetByTestId("screen-words")).ToHaveText("3 screens, the most a desktop has: close a screen window to add another."))
		screenshot(t, page, "screens-list")
		closeSizeList(t, page)
		must(t, third.Close())
		waitDimensions(t, shell, fmt.Sprintf("%dx%d", w1+w2, max(h1, h2)))
	})
	t.Run("closing a screen window folds its screen away", func(t *testing.T) {
		must(t, second.Close())
		waitDimensions(t, shell, fmt.Sprintf("%dx%d", w1, h1))
		if got := screensOf(t, shell); len(got) != 1 {
			t.Errorf("xrandr's monitors are %q; want one", got)
		}
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		openControl(t, page, "size-menu")
		must(t, expect.Locator(page.GetByTestId("size-1280x720")).ToBeEnabled())
		closeSizeList(t, page)
	})
}
