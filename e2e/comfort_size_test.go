package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// chooseSize picks value ("fit", "actual", "1280x720") in the console
// bar's Size list and closes the list (and the folded bar's Menu).
func chooseSize(t *testing.T, page playwright.Page, value string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	openControl(t, page, "size-menu")
	must(t, expect.Locator(page.GetByTestId("size-list")).ToBeVisible())
	must(t, page.GetByTestId("size-"+value).Check())
	must(t, page.GetByTestId("size-menu").Click())
	must(t, expect.Locator(page.GetByTestId("size-list")).ToBeHidden())
	closeMenu(t, page)
}

// waitDimensions waits until the X screen, as xdpyinfo in the desktop
// reports it, is want.
func waitDimensions(t *testing.T, shell *guestShell, want string) {
	t.Helper()
	got := ""
	if !eventually(15*time.Second, func() bool { got = shell.dimensions(); return got == want }) {
		t.Fatalf("xdpyinfo says %s; want %s", got, want)
	}
}

// waitAnswered waits until the page's noVNC has been told the desktop's
// layout and has no size request in flight: a console that asks for a
// size on connect (Fit does) has had its answer.
func waitAnswered(t *testing.T, page playwright.Page) {
	t.Helper()
	_, err := page.WaitForFunction(`() => { const r = document.getElementById('screen').rfb;
		return r && r._supportsSetDesktopSize && !r._pendingRemoteResize; }`, nil)
	must(t, err)
}

// keepsItsSize checks the Size list of a console whose desktop keeps its
// own size: the list says so and that a fixed size scales it instead, no
// refusal is shown, and the list is screenshotted as name.
func keepsItsSize(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	openControl(t, page, "size-menu")
	must(t, expect.Locator(page.GetByTestId("size-note")).ToContainText("This desktop keeps its own size ("))
	must(t, expect.Locator(page.Locator("label:has([data-testid=size-1920x1080]) .size-words")).
		ToHaveText("This desktop keeps its own size: scaled to this window instead."))
	must(t, expect.Locator(page.GetByTestId("size-notice")).ToBeHidden())
	screenshot(t, page, name)
	must(t, page.GetByTestId("size-menu").Click())
	must(t, expect.Locator(page.GetByTestId("size-list")).ToBeHidden())
}

// sizeChoices drives the console bar's Size choice on a local Xvnc
// desktop: a fixed size becomes the X screen's size (read in the desktop
// with xdpyinfo), Actual size shows it unscaled, Fit goes back to the window's
// size, the portal keeps the choice for the user (another browser and a
// reload find it), and a size
// larger than the portal's screen hub holds is refused in words while the
// console stays up at its size. The list is screenshotted open at the
// issue's three sizes.
func sizeChoices(t *testing.T, p *Portal, b *Browser, page playwright.Page, shell *guestShell, login, console string) {
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	label := page.GetByTestId("size-menu")

	t.Run("a choice this browser kept before is the portal's now", func(t *testing.T) {
		// Where the browser kept the choice before the portal did.
		_, err := page.Evaluate(`(key) => localStorage.setItem(key, '1280x720')`, "corral.size."+login)
		must(t, err)
		for _, when := range []string{"taken from the browser", "kept by the portal"} {
			if when == "taken from the browser" {
				res, err := page.ExpectResponse("**/api/vdi/settings/size", func() error { _, err := page.Reload(); return err })
				must(t, err)
				if !res.Ok() {
					t.Fatalf("the page's PUT of the browser's choice: %d", res.Status())
				}
			} else {
				_, err = page.Reload()
				must(t, err)
			}
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			waitDimensions(t, shell, "1280x720")
			must(t, expect.Locator(label).ToHaveAttribute("aria-label", "Size: 1280×720"))
			left, err := page.Evaluate(`(key) => localStorage.getItem(key)`, "corral.size."+login)
			must(t, err)
			if left != nil {
				t.Errorf("%s: the browser still keeps %v", when, left)
			}
		}
	})
	t.Run("a fixed size", func(t *testing.T) {
		chooseSize(t, page, "1280x720")
		waitDimensions(t, shell, "1280x720")
		must(t, expect.Locator(label).ToHaveAttribute("aria-label", "Size: 1280×720"))
	})
	t.Run("actual size keeps the size, unscaled", func(t *testing.T) {
		chooseSize(t, page, "actual")
		must(t, expect.Locator(label).ToHaveAttribute("aria-label", "Size: Actual"))
		must(t, expect.Locator(page.Locator("#screen canvas")).ToHaveJSProperty("clientWidth", 1280))
		if got := shell.dimensions(); got != "1280x720" {
			t.Errorf("after Actual size xdpyinfo says %s; want 1280x720 kept", got)
		}
	})
	t.Run("Fit returns to the window's size", func(t *testing.T) {
		chooseSize(t, page, "fit")
		want, got := "", ""
		if !eventually(15*time.Second, func() bool { want, got = screenSize(t, page), shell.dimensions(); return near(got, want, 2) }) {
			t.Errorf("after Fit xdpyinfo says %s; want the console's %s", got, want)
		}
	})
	t.Run("kept by the portal: another browser, another window size", func(t *testing.T) {
		chooseSize(t, page, "1600x900")
		waitDimensions(t, shell, "1600x900")
		// A browser with nothing of the first one's (another device, say):
		// the choice is the portal's, for the user.
		other := b.MustNewPage(t, 1100, 760)
		signIn(t, other, p, login, console)
		must(t, expect.Locator(other.GetByTestId("status")).ToHaveText("Connected"))
		must(t, expect.Locator(other.GetByTestId("size-menu")).ToHaveAttribute("aria-label", "Size: 1600×900"))
		if got := shell.dimensions(); got != "1600x900" {
			t.Errorf("in another browser xdpyinfo says %s; want the kept 1600x900", got)
		}
		must(t, other.Close())
		_, err := page.Reload()
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		waitAnswered(t, page)
		if got := shell.dimensions(); got != "1600x900" {
			t.Errorf("after a reload xdpyinfo says %s; want the kept 1600x900", got)
		}
		must(t, expect.Locator(label).ToHaveAttribute("aria-label", "Size: 1600×900"))
	})
	t.Run("too large: refused in words, the console stays", func(t *testing.T) {
		// A remembered size past what the portal's screen hub holds (16384
		// a side): Xvnc would take it (up to 32768), and the hub would
		// have to drop the console.
		v, err := page.Evaluate(`async () => (await fetch('/api/vdi/settings/size', { method: 'PUT', headers: { 'Content-Type': 'application/json' },
			body: JSON.stringify({ size: '20000x20000' }) })).status`)
		must(t, err)
		if toFloat(v) != 204 {
			t.Fatalf("keeping the size 20000x20000 answered %v; want 204", v)
		}
		_, err = page.Reload()
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		notice := page.GetByTestId("size-notice")
		must(t, expect.Locator(notice).ToContainText("The desktop refused 20000×20000: its server does not take that size or layout. It stays 1600×900; choose another size under Size."))
		screenshot(t, page, "size-refused")
		time.Sleep(time.Second)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		if got := shell.dimensions(); got != "1600x900" {
			t.Errorf("after the refusal xdpyinfo says %s; want 1600x900 kept", got)
		}
		openControl(t, page, "size-menu")
		must(t, expect.Locator(page.GetByTestId("size-note")).ToContainText("The desktop refused 20000×20000"))
		must(t, expect.Locator(page.GetByTestId("size-20000x20000")).ToBeChecked())
		screenshot(t, page, "size-refused-list")
		must(t, page.GetByTestId("size-menu").Click())
		chooseSize(t, page, "fit")
		must(t, expect.Locator(notice).ToBeHidden())
		must(t, expect.Locator(page.GetByTestId("size-20000x20000")).ToHaveCount(0))
		want, got := "", ""
		if !eventually(15*time.Second, func() bool { want, got = screenSize(t, page), shell.dimensions(); return near(got, want, 2) }) {
			t.Errorf("after Fit xdpyinfo says %s; want the console's %s", got, want)
		}
	})
	t.Run("the list at three sizes", func(t *testing.T) {
		for _, size := range issueSizes {
			must(t, page.SetViewportSize(size.width, size.height))
			// The bar folds or unfolds in the next frames (fold.js).
			_, err := page.Evaluate(`() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))`)
			must(t, err)
			openControl(t, page, "size-menu")
			list := page.GetByTestId("size-list")
			must(t, expect.Locator(list).ToBeVisible())
			must(t, expect.Locator(page.GetByTestId("size-note")).ToContainText("This desktop is "))
			inViewport(t, page, list, "the Size list", size.width)
			noOverflow(t, page)
			screenshot(t, page, "size-list-"+size.name)
			if size.name == "tablet" {
				// The bar folds while the list is open (its status grows
				// longer than the bar has room for): the Size button stays
				// on screen, in the Menu it opened, to close the list with.
				status := page.GetByTestId("status")
				was, err := status.TextContent()
				must(t, err)
				_, err = status.Evaluate(`(s) => { s.textContent = 'Connected; a status longer than this bar has room for beside its controls'; }`, nil)
				must(t, err)
				must(t, expect.Locator(page.Locator("body[data-fold=true]")).ToHaveCount(1))
				must(t, expect.Locator(page.GetByTestId("size-menu")).ToBeVisible())
				must(t, expect.Locator(list).ToBeVisible())
				screenshot(t, page, "size-list-folded")
				_, err = status.Evaluate(`(s, was) => { s.textContent = was; }`, was)
				must(t, err)
			}
			must(t, page.GetByTestId("size-menu").Click())
			must(t, expect.Locator(list).ToBeHidden())
			closeMenu(t, page)
		}
	})
	// The steps after these use the window the test had.
	must(t, page.SetViewportSize(1200, 820))
	want, got := "", ""
	if !eventually(15*time.Second, func() bool { want, got = screenSize(t, page), shell.dimensions(); return near(got, want, 2) }) {
		t.Fatalf("back at 1200x820 xdpyinfo says %s; want the console's %s", got, want)
	}
}

// near reports whether sizes a and b ("WxH") differ by at most d pixels
// each way.
func near(a, b string, d int) bool {
	aw, ah, ok1 := strings.Cut(a, "x")
	bw, bh, ok2 := strings.Cut(b, "x")
	if !ok1 || !ok2 {
		return false
	}
	n := func(s string) int { v, _ := strconv.Atoi(s); return v }
	return abs(n(aw)-n(bw)) <= d && abs(n(ah)-n(bh)) <= d
}

func abs(v int) int { return max(v, -v) }
