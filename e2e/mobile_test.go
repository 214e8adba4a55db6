package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// inViewport fails the test unless the element is visible and wholly
// inside the viewport's width.
func inViewport(t *testing.T, page playwright.Page, l playwright.Locator, what string, width int) {
	t.Helper()
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(l).ToBeVisible())
	box, err := l.BoundingBox()
	must(t, err)
	if box.X < 0 || box.X+box.Width > float64(width)+0.5 {
		screenshot(t, page, "overflow")
		t.Errorf("%s spans x %.0f..%.0f; want it inside the %d px viewport", what, box.X, box.X+box.Width, width)
	}
}

// noOverflow fails the test when the page is wider than its viewport.
func noOverflow(t *testing.T, page playwright.Page) {
	t.Helper()
	v, err := page.Evaluate(`() => [document.documentElement.scrollWidth, window.innerWidth]`)
	must(t, err)
	if w, vw := toInt(v.([]any)[0]), toInt(v.([]any)[1]); w > vw {
		t.Errorf("page is %d px wide in a %d px viewport; want no sideways overflow", w, vw)
	}
}

// twoFingerTap taps with two fingers at once at (x, y), which a phone's
// user does for a right click; Playwright has no multi-touch API, so the
// touches go through the DevTools protocol as Chromium's own input.
func twoFingerTap(t *testing.T, page playwright.Page, x, y float64) {
	t.Helper()
	cdp, err := page.Context().NewCDPSession(page)
	must(t, err)
	defer cdp.Detach()
	points := []map[string]any{{"x": x, "y": y, "id": 1}, {"x": x + 40, "y": y, "id": 2}}
	for _, ev := range []struct {
		kind   string
		points []map[string]any
	}{{"touchStart", points}, {"touchEnd", []map[string]any{}}} {
		_, err := cdp.Send("Input.dispatchTouchEvent", map[string]any{"type": ev.kind, "touchPoints": ev.points})
		must(t, err)
	}
}

// canvasRegion hashes the noVNC canvas's pixels in a box given as
// fractions of its size, to see whether the desktop drew something there.
const canvasRegion = `([fx, fy, fw, fh]) => {
	const c = document.querySelector('#screen canvas');
	const d = c.getContext('2d').getImageData(c.width * fx, c.height * fy, c.width * fw, c.height * fh).data;
	let h = 0;
	for (let i = 0; i < d.length; i += 4) h = (h * 31 + d[i] + d[i + 1] * 7 + d[i + 2] * 13) | 0;
	return h;
}`

// TestMobile_ConsoleOnAPhone uses a desktop from a phone-sized touch
// browser: the header fits, its controls are in reach through the menu, a
// tap focuses the desktop's terminal window, the on-screen keyboard types
// a command into it over VNC and into the terminal console, and a
// two-finger tap opens the desktop's context menu.
func TestMobile_ConsoleOnAPhone(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPhonePage(t, 390, 844)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))

	for _, width := range []int{390, 320} {
		must(t, page.SetViewportSize(width, 700))
		// Zoom 1:1 is in the header beside the status, which stays whole.
		must(t, expect.Locator(page.GetByTestId("zoom-actual")).ToBeVisible())
		noOverflow(t, page)
		if v, err := page.Evaluate(`() => { const s = document.getElementById('status'); return s.scrollWidth <= s.clientWidth; }`); err != nil || v != true {
			t.Errorf("at %d px the header beside Zoom 1:1 cuts its status %q (%v); want it whole", width, "Connected", err)
		}
		menu := page.GetByTestId("console-menu")
		inViewport(t, page, menu, "the menu button", width)
		must(t, menu.Tap())
		for _, id := range []string{"fallback-rdp", "fallback-terminal", "onscreen-keyboard", "release"} {
			inViewport(t, page, page.GetByTestId(id), id, width)
		}
		inViewport(t, page, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Full screen"}), "Full screen", width)
		screenshot(t, page, fmt.Sprintf("menu-%d", width))
		must(t, menu.Tap()) // and closed again
		must(t, expect.Locator(page.GetByTestId("release")).ToBeHidden())
	}
	must(t, page.SetViewportSize(390, 844))
	screenshot(t, page, "vnc-390x844")

	// A tap is a left click: it focuses the terminal window (the keys below
	// reach the shell only if it has the focus).
	// The phone keeps a desktop 1024 px wide with the screen's shape, so
	// that at fit it fills the screen to its bottom edge (at most 1600 px
	// high, it left a fifth of a 390x844 phone empty): wait for it, then
	// tap the desktop's pixel (200, 200), inside its terminal window.
	var size []any
	filled := func() bool {
		v, err := page.Evaluate(`() => { const c = document.querySelector('#screen canvas');
			return c ? [c.width, c.height, c.getBoundingClientRect().height, document.querySelector('#screen').getBoundingClientRect().height] : [0, 0, 0, 0]; }`)
		size, _ = v.([]any)
		return err == nil && len(size) == 4 && toInt(size[0]) == 1024 && toFloat(size[2]) >= toFloat(size[3])-2
	}
	waitFor(t, 15*time.Second, "the phone's 1024 px wide desktop, filling the screen", filled)
	screenshot(t, page, "vnc-390x844-filled")
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	at := func(dx, dy float64) (float64, float64) {
		return box.X + box.Width*dx/toFloat(size[0]), box.Y + box.Height*dy/toFloat(size[1])
	}
	marker := filepath.Join(p.homeOf(d.Name), "osk-marker")
	must(t, page.GetByTestId("console-menu").Tap())
	must(t, page.GetByTestId("onscreen-keyboard").Tap())
	must(t, expect.Locator(page.GetByTestId("osk-keys")).ToBeVisible())
	typed := func() bool {
		x, y := at(200, 200)
		must(t, page.Touchscreen().Tap(int(x), int(y)))
		must(t, page.GetByTestId("osk-input").Focus())
		must(t, page.Keyboard().Press("Enter"))
		time.Sleep(300 * time.Millisecond)
		// The phone's keyboard types into the input; Enter comes from it too.
		must(t, page.Keyboard().Type("touch ~/osk-marke"))
		must(t, page.GetByTestId("osk-Tab").Tap()) // completes nothing: a harmless key from the row
		must(t, page.Keyboard().Press("Backspace"))
		must(t, page.Keyboard().Type("er\n"))
		return eventually(3*time.Second, func() bool { _, err := os.Stat(marker); return err == nil })
	}
	//lint:ignore SA4000 typed() types once more each call: a second try
	if !typed() && !typed() {
		screenshot(t, page, "osk-not-typed")
		t.Fatalf("the on-screen keyboard did not type into the desktop's terminal: no %s", marker)
	}
	if v, _ := page.GetByTestId("osk-input").InputValue(); v != "" {
		t.Errorf("the keyboard's input holds %q; want it emptied as keys go to the desktop", v)
	}
	screenshot(t, page, "osk-vnc")

	// Two fingers are a right click: on the desktop's background openbox
	// opens its menu, which changes the pixels there.
	region := []float64{0.6, 0.55, 0.35, 0.4}
	before, err := page.Evaluate(canvasRegion, region)
	must(t, err)
	x, y := at(0.7*toFloat(size[0]), 0.6*toFloat(size[1]))
	twoFingerTap(t, page, x, y)
	if !eventually(5*time.Second, func() bool {
		now, err := page.Evaluate(canvasRegion, region)
		return err == nil && toInt(now) != toInt(before)
	}) {
		screenshot(t, page, "two-finger-tap")
		t.Error("a two-finger tap on the desktop drew no menu; want a right click")
	}
	screenshot(t, page, "two-finger-menu")

	// A tablet in portrait is as wide as a phone's desktop: it gets a
	// desktop of its own size, which fills it too.
	must(t, page.SetViewportSize(1024, 1366))
	waitFor(t, 15*time.Second, "the tablet's own 1024 px wide desktop, filling the screen", filled)
	screenshot(t, page, "vnc-1024x1366")
	must(t, page.SetViewportSize(390, 844))

	t.Run("terminal", func(t *testing.T) {
		_, err := page.Goto(p.URL + "/desktops/local/" + d.Name + "?protocol=terminal")
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		must(t, page.GetByTestId("console-menu").Tap())
		must(t, page.GetByTestId("onscreen-keyboard").Tap())
		must(t, page.GetByTestId("osk-input").Focus())
		must(t, page.Keyboard().Type("echo osk-2"))
		must(t, page.GetByTestId("osk-ArrowLeft").Tap()) // the cursor moves left,
		must(t, page.Keyboard().Type("4"))               // so this lands before the 2
		must(t, page.Keyboard().Press("Enter"))
		waitXterm(t, page, regexp.MustCompile(`(?m)^osk-42$`), 10*time.Second)
		// Ctrl from the row, then c: an interrupt, which the shell shows as ^C.
		must(t, page.Keyboard().Type("sleep 30"))
		must(t, page.GetByTestId("osk-Control").Tap())
		must(t, page.Keyboard().Type("c"))
		waitXterm(t, page, regexp.MustCompile(`sleep 30\^C`), 10*time.Second)
		screenshot(t, page, "osk-terminal")
	})
}

// TestMobile_PagesAtPhoneWidth keeps the home page, the admin dashboard and
// the kiosk usable on phones and tablets: no sideways overflow, and the
// dashboard's member rows keep their action buttons in reach.
func TestMobile_PagesAtPhoneWidth(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	for _, size := range [][2]int{{390, 844}, {768, 1024}, {1024, 1366}, {1280, 800}} {
		page := b.MustNewPhonePage(t, size[0], size[1])
		signIn(t, page, p, "ops", "/")
		for _, path := range []string{"/", "/admin", "/kiosk/demo"} {
			_, err := page.Goto(p.URL + path)
			must(t, err)
			time.Sleep(500 * time.Millisecond)
			noOverflow(t, page)
			if path == "/admin" {
				buttons := page.GetByTestId("member").Locator("button[data-action], a[data-testid=shadow]")
				if n, err := buttons.Count(); err != nil || n == 0 {
					t.Errorf("at %dx%d the dashboard's member row has no action buttons (%v)", size[0], size[1], err)
				}
				withinWidth(t, buttons, fmt.Sprintf("a member's action at %dx%d", size[0], size[1]))
			}
			screenshot(t, page, fmt.Sprintf("%s-%dx%d", map[string]string{"/": "home", "/admin": "admin", "/kiosk/demo": "kiosk"}[path], size[0], size[1]))
		}
	}
}

// withinWidth checks that every element of loc shows, whole, within the
// page's width (scrolled into view from top to bottom only).
func withinWidth(t *testing.T, loc playwright.Locator, what string) {
	t.Helper()
	all, err := loc.All()
	must(t, err)
	for _, el := range all {
		v, err := el.Evaluate(`el => { el.scrollIntoView({block: 'center', inline: 'nearest'}); const r = el.getBoundingClientRect();
			return [r.left, r.right, r.width, document.documentElement.clientWidth, window.scrollX, el.textContent.trim()]; }`, nil)
		must(t, err)
		r := v.([]any)
		left, right, width, page, scrolled := toFloat(r[0]), toFloat(r[1]), toFloat(r[2]), toFloat(r[3]), toFloat(r[4])
		if width == 0 || left < 0 || right > page || scrolled != 0 {
			t.Errorf("%s %q: at %.0f..%.0f px (page %.0f px wide, scrolled %.0f); want it shown within the page", what, r[5], left, right, page, scrolled)
		}
	}
}
