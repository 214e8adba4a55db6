package e2e

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// canvasColours counts distinct colours in a sample of the noVNC canvas: a
// real desktop (wallpaper, window, text) has many, an empty canvas one.
const canvasColours = `() => {
	const c = document.querySelector('#screen canvas');
	if (!c || !c.width || !c.height) return 0;
	const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
	const seen = new Set();
	for (let i = 0; i < d.length; i += 4 * 37) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
	return seen.size;
}`

// TestSkeleton_SignInClaimSeeRelease is the walking skeleton as a user does
// it: sign in by name, get a desktop, see it drawn by noVNC through the
// portal's relay, type into its terminal, release it.
func TestSkeleton_SignInClaimSeeRelease(t *testing.T) {
	portal := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops")
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	page.OnDialog(func(d playwright.Dialog) { d.Accept() })

	if _, err := page.Goto(portal.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`/signin\?next=%2F$`).MatchString(page.URL()) {
		t.Fatalf("unsigned visit to / landed on %s; want the sign-in page", page.URL())
	}
	screenshot(t, page, "1-signin")
	must(t, page.GetByTestId("login").Fill("alice"))
	must(t, page.GetByTestId("signin").Click())
	must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText("alice"))
	demo := page.Locator(`[data-pool="demo"]`)
	must(t, expect.Locator(demo.GetByTestId("free")).ToHaveText("3 of 3 free"))
	docShot(t, page, "home")

	start := time.Now()
	must(t, demo.GetByTestId("get-desktop").Click())
	must(t, page.WaitForURL(regexp.MustCompile(`/desktops/local/demo-\d$`)))
	member := regexp.MustCompile(`demo-\d$`).FindString(page.URL())
	// The page opens the best console, RDP (see rdp_test.go); the skeleton
	// walks the VNC path, which the page offers as a fallback.
	if _, err := page.Goto(page.URL() + "?protocol=vnc"); err != nil {
		t.Fatal(err)
	}
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	var colours int
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		v, err := page.Evaluate(canvasColours)
		must(t, err)
		if colours = toInt(v); colours > 20 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if colours <= 20 {
		screenshot(t, page, "3-console-blank")
		t.Fatalf("noVNC canvas has %d colours after 10s; want a drawn desktop with its terminal window (> 20)", colours)
	}
	t.Logf("desktop %s drawn %v after pressing Get a desktop (%d colours sampled)", member, time.Since(start).Round(time.Millisecond), colours)

	// Type into the desktop's terminal: keystrokes go through noVNC, the
	// websocket relay and Xvnc into the shell, which makes a file.
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	marker := filepath.Join(portal.homeOf(member), "corral-marker")
	typed := func() bool {
		// The first keys may arrive before the window has focus or the
		// shell its prompt: click into the terminal and start with a fresh
		// line each time.
		must(t, page.Mouse().Click(box.X+box.Width*200/1280, box.Y+box.Height*200/800))
		must(t, page.Keyboard().Press("Enter"))
		time.Sleep(300 * time.Millisecond)
		must(t, page.Keyboard().Type("touch ~/corral-marker\n"))
		return eventually(3*time.Second, func() bool { _, err := os.Stat(marker); return err == nil })
	}
	//lint:ignore SA4000 typed() types once more each call: a second try
	if !typed() && !typed() {
		screenshot(t, page, "3-console-typed")
		t.Fatalf("typing into the desktop's terminal did not create %s", marker)
	}
	time.Sleep(300 * time.Millisecond) // let the typed line reach the screen
	docShot(t, page, "console")

	must(t, page.GetByTestId("release").Click())
	must(t, page.GetByTestId("confirm-yes").Click()) // the page's own confirmation
	must(t, page.WaitForURL(regexp.MustCompile(`/\?notice=released`)))
	must(t, expect.Locator(page.GetByTestId("notice")).ToContainText("Released local/"))
	must(t, expect.Locator(demo.GetByTestId("free")).ToHaveText("3 of 3 free"))
	must(t, expect.Locator(page.GetByTestId("no-desktops")).ToBeVisible())
	screenshot(t, page, "4-released")

	var all []desktop
	if code := portal.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all); code != 200 {
		t.Fatalf("admin list: status %d", code)
	}
	for _, d := range all {
		if d.Name == member && (d.Power != "stopped" || !d.free()) {
			t.Errorf("after release %s is %s held by %q; want stopped and free", member, d.Power, d.Holder)
		}
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ephemeral member's home survived release: stat %s: %v", marker, err)
	}
}

func must(tb testing.TB, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// eventually reports whether ok holds within d, stretched where tests
// share the machine (testwait).
func eventually(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(testwait.D(d)); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}

func toInt(v any) int {
	switch n := v.(type) {
	case int:
		return n
	case float64:
		return int(n)
	}
	return 0
}
