package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// kubeScreens drives the holder's console of a KubeVirt VM on two screens
// (#57). KubeVirt gives a VM one display (one VNC stream), so Add a screen
// opens a second window, the console asks the display for one screen as
// large as both windows side by side, and each window shows its part,
// unscaled, a guest's window there included; the pointer goes where the
// window that has it points, and keys from the window that has the focus
// (typed into that guest window). A
// window too wide for the display (a part beyond what its server takes)
// is refused by size, which the console says, and each window then shows
// all of the desktop, scaled. The screen window is screenshotted at the
// issue's three sizes; closing it gives the console one screen again. The
// guest's display is read from its own X server (xdpyinfo, the pointer).
func kubeScreens(t *testing.T, e *kubeEnv, page playwright.Page, vm string) {
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	guest := func(cmd string) string {
		out, err := e.standIn.OnGuestDisplay(e.ns, vm, cmd)
		if err != nil {
			t.Fatalf("%s on %s's display: %v: %s", cmd, vm, err, out)
		}
		return out
	}
	dims := func() string {
		m := regexp.MustCompile(`dimensions:\s+(\d+x\d+) pixels`).FindStringSubmatch(guest("xdpyinfo"))
		if m == nil {
			return ""
		}
		return m[1]
	}
	pointerAt := func(win playwright.Page, x, y, wantX, wantY int) {
		t.Helper()
		must(t, win.Locator("#screen canvas").Hover(playwright.LocatorHoverOptions{Position: &playwright.Position{X: float64(x), Y: float64(y)}}))
		gx, gy := -1, -1
		// Within a pixel: the canvas may start a fraction of one below the bar.
		if !eventually(10*time.Second, func() bool {
			if m := ptrRe.FindStringSubmatch(guest(xPointer)); m != nil {
				gx, gy = atoi(m[1]), atoi(m[2])
			}
			return abs(gx-wantX) <= 1 && abs(gy-wantY) <= 1
		}) {
			t.Errorf("the guest's pointer is at %d,%d; want %d,%d", gx, gy, wantX, wantY)
		}
	}
	// view reads how a window shows the desktop: its part at x (clipped,
	// unscaled) or all of it (scaled).
	view := func(win playwright.Page) string {
		v, err := win.Evaluate(`() => { const r = document.getElementById('screen').rfb;
			return r.scaleViewport ? 'all' : r.clipViewport ? 'part at ' + r._display._viewportLoc.x : 'unclipped'; }`)
		must(t, err)
		return fmt.Sprint(v)
	}

	openControl(t, page, "size-menu")
	must(t, expect.Locator(page.GetByTestId("screen-words")).ToContainText("the VM's one display grows to your windows' size together"))
	must(t, expect.Locator(page.GetByTestId("screen-add")).ToBeEnabled())
	screenshot(t, page, "kube-screens-list")
	closeSizeList(t, page)
	second := addScreen(t, page, 1000, 700)
	must(t, expect.Locator(second.GetByTestId("screen-badge")).ToHaveText("Screen 2"))
	w1, h1 := wholeSize(t, page)
	w2, h2 := wholeSize(t, second)
	want := fmt.Sprintf("%dx%d", w1+w2, max(h1, h2))
	waitFor(t, 20*time.Second, "the guest's display at "+want+", both windows together", func() bool { return dims() == want })
	shown(t, page, w1+w2, max(h1, h2))
	shown(t, second, w1+w2, max(h1, h2))
	if got := view(page); got != "part at 0" {
		t.Errorf("the console's window shows %s; want its part at 0", got)
	}
	if got := view(second); got != fmt.Sprintf("part at %d", w1) {
		t.Errorf("screen 2's window shows %s; want its part at %d", got, w1)
	}
	openControl(t, page, "size-menu")
	must(t, expect.Locator(page.GetByTestId("size-note")).ToContainText("one display split over 2 windows"))
	closeSizeList(t, page)
	pointerAt(second, 300, 200, w1+300, 200)
	pointerAt(page, 50, 60, 50, 60)
	// A window of the guest's on screen 2's part: that window draws it
	// (an xterm's white) where its part has it.
	pid := strings.TrimSpace(guest(fmt.Sprintf("cd \"$HOME\" && xterm -geometry 30x5+%d+80 -title screen2 >/dev/null 2>&1 & echo $!", w1+60)))
	defer e.standIn.OnGuestDisplay(e.ns, vm, "kill "+pid)
	if _, err := second.WaitForFunction(`() => { const c = document.querySelector('#screen canvas');
		return [...c.getContext('2d').getImageData(120, 140, 1, 1).data].join() === '255,255,255,255'; }`, nil); err != nil {
		t.Errorf("screen 2's window does not show the xterm at the guest's %d,80: %v", w1+60, err)
	}
	// Keys go from the window that has the focus: typed in screen 2's
	// window, into that xterm.
	must(t, second.Locator("#screen canvas").Click(playwright.LocatorClickOptions{Position: &playwright.Position{X: 120, Y: 140}}))
	must(t, second.Keyboard().Type("echo typed-on-screen-2 > screen2.txt\n"))
	typed := ""
	if !eventually(20*time.Second, func() bool {
		typed, _ = e.standIn.OnGuestDisplay(e.ns, vm, `cat "$HOME/screen2.txt"`)
		return strings.TrimSpace(typed) == "typed-on-screen-2"
	}) {
		t.Errorf("the guest's screen2.txt holds %q; want what was typed in screen 2's window", typed)
	}
	screenshot(t, page, "kube-screens-1")
	screenshot(t, second, "kube-screens-2")

	for _, size := range issueSizes {
		must(t, second.SetViewportSize(size.width, size.height))
		w, h := 0, 0
		if !eventually(20*time.Second, func() bool {
			w, h = wholeSize(t, second)
			return dims() == fmt.Sprintf("%dx%d", w1+w, max(h1, h))
		}) {
			t.Errorf("a %s screen window: the guest's display is %s; want %dx%d", size.name, dims(), w1+w, max(h1, h))
		}
		shown(t, second, w1+w, max(h1, h))
		must(t, expect.Locator(second.GetByTestId("screen-badge")).ToHaveText("Screen 2"))
		noOverflow(t, second)
		screenshot(t, second, "kube-screen-window-"+size.name)
	}
	must(t, second.SetViewportSize(1000, 700))
	waitFor(t, 20*time.Second, "the guest's display back at "+want, func() bool { return dims() == want })

	// 16000 px beside the console's window is more than the display's
	// server takes: the console says so, and both windows show all of it.
	must(t, second.SetViewportSize(16000, 700))
	must(t, expect.Locator(page.GetByTestId("size-notice")).ToContainText("your 2 windows together"))
	if _, err := page.WaitForFunction(`() => document.getElementById('screen').rfb.scaleViewport`, nil); err != nil {
		t.Errorf("after the refusal the console's window shows %s; want all of the desktop", view(page))
	}
	if _, err := second.WaitForFunction(`() => document.getElementById('screen').rfb.scaleViewport`, nil); err != nil {
		t.Errorf("after the refusal screen 2's window shows %s; want all of the desktop", view(second))
	}
	must(t, expect.Locator(second.GetByTestId("screen-badge")).ToHaveText("Screen 2: all of the desktop"))
	if got := dims(); got != want {
		t.Errorf("after the refusal the guest's display is %s; want it as it was, %s", got, want)
	}
	screenshot(t, page, "kube-screens-refused-1")
	// Its middle only, where the scaled desktop is: the window is 16000
	// px wide.
	_, err := second.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(filepath.Join("output", t.Name(), "kube-screens-refused-2.png")),
		Clip: &playwright.Rect{X: 8000 - 640, Width: 1280, Height: 700}})
	must(t, err)
	must(t, second.SetViewportSize(1000, 700))
	waitFor(t, 20*time.Second, "the guest's display back at "+want, func() bool { return dims() == want })
	must(t, expect.Locator(page.GetByTestId("size-notice")).ToBeHidden())
	if _, err := second.WaitForFunction(`() => !document.getElementById('screen').rfb.scaleViewport`, nil); err != nil {
		t.Errorf("screen 2's window at 1000x700 again shows %s; want its part", view(second))
	}

	must(t, second.Close())
	waitFor(t, 20*time.Second, fmt.Sprintf("the guest's display back at the console's %dx%d", w1, h1), func() bool { return dims() == fmt.Sprintf("%dx%d", w1, h1) })
	openControl(t, page, "size-menu")
	must(t, expect.Locator(page.GetByTestId("size-1280x720")).ToBeEnabled())
	if s, _ := page.GetByTestId("size-note").TextContent(); strings.Contains(s, "windows") {
		t.Errorf("with one window again the Size note says %q", s)
	}
	closeSizeList(t, page)
}
