package e2e

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// touchPath touches the page with one finger at path[0], rests there for
// hold, moves along the rest of path and lifts, through the DevTools
// protocol as Chromium's own touch input.
func touchPath(t *testing.T, page playwright.Page, hold time.Duration, path ...[2]float64) {
	t.Helper()
	cdp, err := page.Context().NewCDPSession(page)
	must(t, err)
	defer cdp.Detach()
	send := func(kind string, p [2]float64) {
		points := []map[string]any{}
		if kind != "touchEnd" {
			points = append(points, map[string]any{"x": p[0], "y": p[1], "id": 1})
		}
		_, err := cdp.Send("Input.dispatchTouchEvent", map[string]any{"type": kind, "touchPoints": points})
		must(t, err)
	}
	send("touchStart", path[0])
	time.Sleep(hold)
	last := path[0]
	for _, to := range path[1:] {
		const steps = 10
		from := last
		for i := 1; i <= steps; i++ {
			f := float64(i) / steps
			time.Sleep(30 * time.Millisecond)
			send("touchMove", [2]float64{from[0] + (to[0]-from[0])*f, from[1] + (to[1]-from[1])*f})
		}
		last = to
	}
	time.Sleep(30 * time.Millisecond)
	send("touchEnd", last)
}

// xevButton is one button event that xev logged: what, where on the
// desktop (root coordinates) and which button (4 and 5 are the wheel).
type xevButton struct {
	Press        bool
	X, Y, Button int
}

var xevButtonRe = regexp.MustCompile(`(?s)(ButtonPress|ButtonRelease) event.*?root:\((\d+),(\d+)\),\s+state 0x[0-9a-f]+, button (\d+)`)

// xevButtons reads the button events an xev window logged to file.
func xevButtons(t *testing.T, file string) []xevButton {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []xevButton
	for _, m := range xevButtonRe.FindAllStringSubmatch(string(b), -1) {
		out = append(out, xevButton{m[1] == "ButtonPress", atoi(m[2]), atoi(m[3]), atoi(m[4])})
	}
	return out
}

// presses counts the presses of button among events.
func presses(events []xevButton, button int) int {
	n := 0
	for _, e := range events {
		if e.Press && e.Button == button {
			n++
		}
	}
	return n
}

// xMenus lists the menus open on the desktop: openbox shows a menu as a
// viewable top-level window of type _NET_WM_WINDOW_TYPE_POPUP_MENU.
const xMenus = `for w in $(xwininfo -root -children | grep -o '^ *0x[0-9a-f]*'); do xprop -id $w _NET_WM_WINDOW_TYPE | grep -q POPUP_MENU && xwininfo -id $w | awk '/Absolute upper-left X/{x=$NF} /Absolute upper-left Y/{y=$NF} /Width:/{w=$NF} /Height:/{h=$NF} /Map State: IsViewable/{v=1} END{if(v)printf "menu=%d,%d,%d,%d\n",x,y,w,h}'; done`

var menuRe = regexp.MustCompile(`menu=(\d+),(\d+),(\d+),(\d+)`)

// desktopAt is the desktop's pixel shown at the page's (x, y).
func (b canvasBox) desktopAt(x, y float64) [2]float64 {
	return [2]float64{(x - b.X) * b.W / b.Width, (y - b.Y) * b.H / b.Height}
}

// menus returns the desktop's open menus as [x, y, width, height].
func (g *guestShell) menus() [][4]int {
	g.t.Helper()
	var out [][4]int
	for _, m := range menuRe.FindAllStringSubmatch(g.run(xMenus), -1) {
		out = append(out, [4]int{atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])})
	}
	return out
}

// TestMobile_TouchToRDP uses an RDP desktop with touch from a phone, each
// gesture read back from the desktop's X server: a tap is a left click
// where the finger is (xev sees button 1 there and openbox gives its window
// the focus), two fingers dragging turn the wheel where they are (xev sees
// buttons 5 and 4), a two-finger tap and a long press on the desktop's
// background open openbox's root menu there (a right click), two fingers
// dragging while zoomed pan the view and do not scroll, and one finger
// dragging a window's title bar moves the window (the button held).
func TestMobile_TouchToRDP(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000)) // IronRDP compiles 6 MB of wasm first
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPhonePage(t, 390, 844)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=rdp")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	g := openGuestShell(t, p, "alice", d.Name)
	var fit canvasBox
	if !eventually(20*time.Second, func() bool { fit = readCanvas(t, page); return fit.W > 300 && fit.Width > 100 }) {
		t.Fatalf("no desktop drawn: %+v", fit)
	}
	// The desktop settles in its fit: shown at its own aspect, the same
	// for half a second (while IronRDP's first frames come the canvas may
	// be stretched for a moment, and a tap aimed by that box lands off).
	settled := func() bool {
		a := readCanvas(t, page)
		time.Sleep(500 * time.Millisecond)
		fit = readCanvas(t, page)
		return a == fit && math.Abs(fit.Width/fit.Height-fit.W/fit.H) < 0.02*fit.W/fit.H
	}
	if !eventually(20*time.Second, settled) {
		t.Fatalf("the desktop never settled at its aspect: %+v", fit)
	}
	t.Logf("desktop %vx%v shown at (%.0f, %.0f) %.0fx%.0f", fit.W, fit.H, fit.X, fit.Y, fit.Width, fit.Height)

	// An xev window on the right of the desktop logs the buttons it gets.
	big := winPosRe.FindStringSubmatch(g.run("xwininfo -name " + d.Name))
	if big == nil {
		t.Fatal("no terminal window on the desktop")
	}
	log := filepath.Join(p.homeOf(d.Name), "xev-touch.log")
	// Below the top, where the sign-in panel covers the desktop on a phone.
	xw, xh := 300, int(fit.H)-300
	g.run(fmt.Sprintf("stdbuf -oL xev -event button -name xev-touch -geometry %dx%d+%d+200 >~/xev-touch.log 2>&1 & true", xw, xh, int(fit.W)-xw-30))
	var info string
	if !eventually(10*time.Second, func() bool {
		info = g.run("xwininfo -name xev-touch")
		return winPosRe.MatchString(info)
	}) {
		t.Fatalf("the xev window did not open: %s", info)
	}
	xev := winIDRe.FindStringSubmatch(info)[1]
	m := winPosRe.FindStringSubmatch(info)
	ax, ay, aw, ah := atoi(m[1]), atoi(m[2]), atoi(m[3]), atoi(m[4])
	if ax < atoi(big[1])+atoi(big[3]) {
		t.Fatalf("the xev window at x %d overlaps the terminal (x %s, %s wide)", ax, big[1], big[3])
	}
	t.Logf("xev window %s at (%d, %d) %dx%d", xev, ax, ay, aw, ah)
	near := func(e xevButton, x, y float64) bool {
		return math.Abs(float64(e.X)-x) <= 4 && math.Abs(float64(e.Y)-y) <= 4
	}

	t.Run("tap", func(t *testing.T) {
		// The terminal takes the focus first: the tap on xev must take it back.
		x, y := fit.client(200, 120)
		must(t, page.Touchscreen().Tap(int(x), int(y)))
		if !eventually(5*time.Second, func() bool { return g.active() != xev && g.active() != "" }) {
			t.Fatalf("a tap on the terminal left the focus on %q", g.active())
		}
		before := len(xevButtons(t, log))
		x, y = fit.client(float64(ax+aw/2), float64(ay+ah/3))
		must(t, page.Touchscreen().Tap(int(x), int(y)))
		at := fit.desktopAt(float64(int(x)), float64(int(y)))
		tx, ty := at[0], at[1]
		if !eventually(5*time.Second, func() bool { return g.active() == xev }) {
			screenshot(t, page, "rdp-tap")
			t.Errorf("a tap on window %s did not give it the focus; %q has it", xev, g.active())
		}
		got := xevButtons(t, log)[before:]
		if len(got) != 2 || !got[0].Press || got[0].Button != 1 || got[1].Press || got[1].Button != 1 || !near(got[0], tx, ty) {
			t.Errorf("a tap at the desktop's (%.0f, %.0f) gave xev %+v; want button 1 pressed and released there", tx, ty, got)
		}
		screenshot(t, page, "rdp-390x844")
		// A double tap is a double click: the second tap, a few pixels off
		// as fingers are, clicks the same pixel as the first.
		before = len(xevButtons(t, log))
		x, y = fit.client(float64(ax+aw/2), float64(ay+ah/2))
		must(t, page.Touchscreen().Tap(int(x), int(y)))
		must(t, page.Touchscreen().Tap(int(x)+5, int(y)+4))
		eventually(3*time.Second, func() bool { got = xevButtons(t, log)[before:]; return len(got) >= 4 })
		if len(got) != 4 || presses(got, 1) != 2 || got[0].X != got[2].X || got[0].Y != got[2].Y {
			t.Errorf("a double tap gave xev %+v; want button 1 clicked twice at the same pixel", got)
		}
	})

	t.Run("two-finger-drag-scrolls", func(t *testing.T) {
		before := len(xevButtons(t, log))
		cx, cy := fit.client(float64(ax+aw/2), float64(ay+ah/2))
		// Fingers going up scroll down (button 5), as a phone's page does.
		touches(t, page, [2][2]float64{{cx - 20, cy + 50}, {cx + 20, cy + 50}}, [2][2]float64{{cx - 20, cy - 60}, {cx + 20, cy - 60}})
		var got []xevButton
		eventually(3*time.Second, func() bool { got = xevButtons(t, log)[before:]; return presses(got, 5) >= 2 })
		if presses(got, 5) < 2 || presses(got, 4) != 0 || presses(got, 1)+presses(got, 3) != 0 {
			t.Errorf("two fingers dragging 110 px up over xev gave it %+v; want button 5 (wheel down) at least twice and no other button", got)
		}
		before += len(got)
		touches(t, page, [2][2]float64{{cx - 20, cy - 60}, {cx + 20, cy - 60}}, [2][2]float64{{cx - 20, cy + 50}, {cx + 20, cy + 50}})
		eventually(3*time.Second, func() bool { got = xevButtons(t, log)[before:]; return presses(got, 4) >= 2 })
		if presses(got, 4) < 2 || presses(got, 5) != 0 {
			t.Errorf("two fingers dragging 110 px down over xev gave it %+v; want button 4 (wheel up) at least twice", got)
		}
		for _, e := range got {
			if e.X < ax || e.X >= ax+aw || e.Y < ay || e.Y >= ay+ah {
				t.Errorf("the wheel turned at the desktop's (%d, %d), outside the xev window under the fingers", e.X, e.Y)
				break
			}
		}
		screenshot(t, page, "scrolled")
		if z, _ := page.Locator("#screen").GetAttribute("data-zoomed"); z == "true" {
			t.Errorf("a two-finger drag at fit zoomed the view")
		}
	})

	// The desktop's background, below the terminal (DejaVu Sans Mono 11
	// leaves it some 200 px of the 800) and left of xev: half way down
	// that strip, so a frame or a taller font stays clear of it (openbox
	// moves the menu up to fit, still under the finger).
	termBottom := float64(atoi(big[2]) + atoi(big[4]))
	if fit.H-termBottom < 60 {
		t.Fatalf("the terminal reaches y %.0f of the desktop's %.0f: no background below it to right-click", termBottom, fit.H)
	}
	bx, by := float64(atoi(big[1])+60), termBottom+(fit.H-termBottom)/2
	rightClick := func(t *testing.T, how string, do func(x, y float64)) {
		if open := g.menus(); len(open) > 0 {
			t.Fatalf("a menu is open before the %s: %v", how, open)
		}
		x, y := fit.client(bx, by)
		do(x, y)
		var open [][4]int
		if !eventually(5*time.Second, func() bool { open = g.menus(); return len(open) > 0 }) {
			screenshot(t, page, how+"-no-menu")
			t.Fatalf("a %s on the desktop's background opened no menu; want openbox's root menu (a right click)", how)
		}
		screenshot(t, page, how+"-menu")
		mx, my, mw, mh := float64(open[0][0]), float64(open[0][1]), float64(open[0][2]), float64(open[0][3])
		if math.Abs(mx-bx) > 24 || by < my-24 || by > my+mh+24 {
			t.Errorf("the %s at the desktop's (%.0f, %.0f) opened a menu at (%.0f, %.0f) %.0fx%.0f; want it where the finger was", how, bx, by, mx, my, mw, mh)
		}
		// A tap away from the menu closes it.
		x, y = fit.client(10, fit.H-10)
		must(t, page.Touchscreen().Tap(int(x), int(y)))
		if !eventually(5*time.Second, func() bool { return len(g.menus()) == 0 }) {
			t.Fatalf("a tap outside the menu left it open: %v", g.menus())
		}
	}
	t.Run("two-finger-tap", func(t *testing.T) {
		rightClick(t, "two-finger-tap", func(x, y float64) { twoFingerTap(t, page, x-20, y) })
	})
	t.Run("long-press", func(t *testing.T) {
		rightClick(t, "long-press", func(x, y float64) { touchPath(t, page, 1200*time.Millisecond, [2]float64{x, y}) })
	})

	t.Run("zoomed-two-finger-drag-pans", func(t *testing.T) {
		cx, cy := fit.client(float64(ax+aw/2), float64(ay+ah/2))
		before := len(xevButtons(t, log))
		pinchOut(t, page, math.Min(cx, 300), cy, 60, 2.5) // both fingers on the screen
		must(t, expect.Locator(page.GetByTestId("zoom-fit")).ToBeVisible())
		zoomed := readCanvas(t, page)
		// Over xev, left and up: the view pans sideways (a zoomed phone's
		// desktop is wider than the screen, not taller) and xev, on the
		// desktop's right, stays under the fingers, where a wheel would go.
		sx, sy := zoomed.client(float64(ax+aw/4), float64(ay+ah/2))
		sx = math.Min(sx, 340)
		touches(t, page, [2][2]float64{{sx, sy - 30}, {sx, sy + 30}}, [2][2]float64{{sx - 120, sy - 130}, {sx - 120, sy - 70}})
		time.Sleep(time.Second)
		panned := readCanvas(t, page)
		screenshot(t, page, "zoomed-pan")
		if got := xevButtons(t, log)[before:]; len(got) > 0 {
			t.Errorf("a pinch and a two-finger drag while zoomed gave xev %+v; want the view zoomed and panned, the desktop left alone", got)
		}
		if dx := zoomed.X - panned.X; dx < 60 || math.Abs(panned.Width-zoomed.Width) > zoomed.Width*0.15 {
			t.Errorf("two fingers dragging (-120, -100) px while zoomed moved the view by %.0f px and sized it %.0f -> %.0f; want it panned left", dx, zoomed.Width, panned.Width)
		}
		// A tap while zoomed still clicks the pixel under the finger: the
		// middle of the part of xev on the screen.
		lo, hi := panned.desktopAt(10, 10), panned.desktopAt(380, 834)
		tx := (math.Max(lo[0], float64(ax+5)) + math.Min(hi[0], float64(ax+aw-5))) / 2
		ty := (math.Max(lo[1], float64(ay+5)) + math.Min(hi[1], float64(ay+ah-5))) / 2
		x, y := panned.client(tx, ty)
		before = len(xevButtons(t, log))
		must(t, page.Touchscreen().Tap(int(x), int(y)))
		at := panned.desktopAt(float64(int(x)), float64(int(y)))
		tx, ty = at[0], at[1]
		var got []xevButton
		eventually(3*time.Second, func() bool { got = xevButtons(t, log)[before:]; return len(got) >= 2 })
		if len(got) < 1 || got[0].Button != 1 || !near(got[0], tx, ty) {
			t.Errorf("a tap while zoomed at the desktop's (%.0f, %.0f) gave xev %+v; want button 1 there", tx, ty, got)
		}
		must(t, page.GetByTestId("zoom-fit").Tap())
		must(t, expect.Locator(page.GetByTestId("zoom-fit")).ToBeHidden())
	})

	t.Run("drag-moves-a-window", func(t *testing.T) {
		time.Sleep(500 * time.Millisecond)
		fit := readCanvas(t, page)
		// One finger on xev's title bar, dragged left and down: openbox
		// moves the window while the button is held.
		from := [2]float64{}
		from[0], from[1] = fit.client(float64(ax+aw/2), float64(ay-8))
		to := [2]float64{from[0] - 50, from[1] + 30}
		touchPath(t, page, 100*time.Millisecond, from, to)
		wantX, wantY := float64(ax)-50*fit.W/fit.Width, float64(ay)+30*fit.H/fit.Height
		var nx, ny int
		if !eventually(5*time.Second, func() bool {
			m := winPosRe.FindStringSubmatch(g.run("xwininfo -id " + xev))
			if m == nil {
				return false
			}
			nx, ny = atoi(m[1]), atoi(m[2])
			return math.Abs(float64(nx)-wantX) <= 8 && math.Abs(float64(ny)-wantY) <= 8
		}) {
			screenshot(t, page, "drag")
			t.Errorf("dragging xev's title bar by (-50, 30) px put it at (%d, %d); want (%.0f, %.0f), moved with the finger", nx, ny, wantX, wantY)
		}
		screenshot(t, page, "dragged")
	})
	g.run("kill %1 2>/dev/null; true")
}
