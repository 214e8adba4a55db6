package e2e

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// idleSizes are the windows an idle console is measured at: common laptop
// and desktop screens, where the console bar's 56.5625 px left the
// screen a fraction of a pixel high.
var idleSizes = [][2]int{{1280, 800}, {1366, 768}, {1440, 900}, {1920, 1080}}

// idleRatios are the device pixel ratios an idle console is measured at.
var idleRatios = []float64{1, 1.25, 1.5}

// idleBudget is the most an idle console may send each way in a minute:
// keepalives (issue 56's goal).
const idleBudget = 4 << 10

// wsBytes counts, as Chromium sees them, the bytes of a page's VNC
// console websocket frames each way.
type wsBytes struct{ in, out atomic.Int64 }

// countVNCBytes counts page's VNC console websocket frames from now on.
func countVNCBytes(page playwright.Page) *wsBytes {
	n := &wsBytes{}
	page.OnWebSocket(func(ws playwright.WebSocket) {
		if !strings.Contains(ws.URL(), "/ws/vnc/") {
			return
		}
		ws.OnFrameReceived(func(b []byte) { n.in.Add(int64(len(b))) })
		ws.OnFrameSent(func(b []byte) { n.out.Add(int64(len(b))) })
	})
	return n
}

// settle waits until no frame has crossed either way for two seconds:
// the new size's screens all drawn (on a loaded machine the desktop's
// programs repaint after a resize for seconds). A console that never
// goes quiet in 30 s fails the test here.
func (n *wsBytes) settle(t *testing.T, what string) {
	t.Helper()
	const quiet = 2 * time.Second
	last, since := n.in.Load()+n.out.Load(), time.Now()
	for end := time.Now().Add(testwait.D(30 * time.Second)); time.Now().Before(end); time.Sleep(250 * time.Millisecond) {
		if now := n.in.Load() + n.out.Load(); now != last {
			last, since = now, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
	t.Fatalf("%s: the console never went quiet for %v after the resize (%d bytes so far)", what, quiet, last)
}

// desktopFits is a JS function telling whether noVNC's desktop has taken
// its screen's size in whole pixels.
const desktopFits = `() => {
  const rfb = document.getElementById('screen')?.rfb;
  if (!rfb || !rfb._screen) return false;
  const r = rfb._screen.getBoundingClientRect();
  return rfb._fbWidth === Math.floor(r.width) && rfb._fbHeight === Math.floor(r.height);
}`

// idleConsole opens member's VNC console as user in a window of the first
// of idleSizes at device pixel ratio dpr, then, for each size, resizes the
// window, waits until the desktop has taken its size and the console has
// gone quiet, and calls measured with the bytes each way over the next
// window.
func idleConsole(t *testing.T, b *Browser, p *Portal, user, member string, dpr float64, window time.Duration, measured func(size [2]int, in, out int64)) {
	t.Helper()
	ctx, err := b.Chromium.NewContext(playwright.BrowserNewContextOptions{
		Viewport:          &playwright.Size{Width: idleSizes[0][0], Height: idleSizes[0][1]},
		DeviceScaleFactor: playwright.Float(dpr),
	})
	must(t, err)
	defer ctx.Close() // the next console of the same user takes its place
	page, err := ctx.NewPage()
	must(t, err)
	page.SetDefaultTimeout(testwait.MS(15000))
	keepBrowserErrors(t, page, fmt.Sprintf("dpr %v", dpr))
	n := countVNCBytes(page)
	signIn(t, page, p, user, "/desktops/local/"+member+"?protocol=vnc")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(30000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	for _, size := range idleSizes {
		must(t, page.SetViewportSize(size[0], size[1]))
		waitFor(t, 15*time.Second, fmt.Sprintf("the desktop at %dx%d@%v takes the window's size", size[0], size[1], dpr), func() bool {
			v, err := page.Evaluate(desktopFits)
			return err == nil && v == true
		})
		n.settle(t, fmt.Sprintf("%dx%d@%v", size[0], size[1], dpr))
		in, out := n.in.Load(), n.out.Load()
		time.Sleep(window)
		measured(size, n.in.Load()-in, n.out.Load()-out)
	}
	screenshot(t, page, fmt.Sprintf("idle-dpr%v", dpr))
}

// TestConsole_IdleBytes: an idle VNC console in Chromium sends nothing but
// keepalives, at common window sizes and device pixel ratios. The console
// bar is 56.5625 px high, so the screen was a fraction of a pixel off
// every whole-pixel desktop: noVNC asked for its size again every 100 ms
// and each answer repainted the screen, 0.1-0.7 MB/s for as long as the
// console was open.
func TestConsole_IdleBytes(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", fmt.Sprintf(`{"name": "idle", "size": %d}`, len(idleRatios)), nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	b := MustLaunchBrowser(t)
	window := 10 * time.Second
	for i, dpr := range idleRatios {
		user := fmt.Sprintf("user%d", i)
		d := mustClaim(t, p, user, "idle")
		t.Run(fmt.Sprintf("dpr=%v", dpr), func(t *testing.T) {
			t.Parallel() // a desktop each: their sizes are their own
			idleConsole(t, b, p, user, d.Name, dpr, window, func(size [2]int, in, out int64) {
				perMin := float64(in+out) / window.Minutes()
				t.Logf("%dx%d@%v: %d bytes in, %d out over %v at rest", size[0], size[1], dpr, in, out, window)
				if perMin > idleBudget {
					t.Errorf("%dx%d@%v: an idle console moved %d bytes to the browser and %d back in %v (%.0f KiB/min); want keepalives only (<= %d KiB/min)",
						size[0], size[1], dpr, in, out, window, perMin/1024, idleBudget>>10)
				}
			})
		})
	}
}

// TestBench_IdleConsole reports, for `make bench`, an idle VNC console's
// bytes per minute in Chromium at each of idleSizes and idleRatios, then
// the whole page's of each of idleConsoles (benchIdlePages).
// Skipped unless CORRAL_VDI_BENCH=1; CORRAL_VDI_BENCH_SECONDS sets each
// measure's length (default 20). It reports; it asserts nothing.
func TestBench_IdleConsole(t *testing.T) {
	if os.Getenv("CORRAL_VDI_BENCH") != "1" {
		t.Skip("a benchmark: set CORRAL_VDI_BENCH=1 (make bench)")
	}
	secs, _ := strconv.Atoi(os.Getenv("CORRAL_VDI_BENCH_SECONDS"))
	if secs <= 0 {
		secs = 20
	}
	window := time.Duration(secs) * time.Second
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "idle", "size": 1}`, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	d := mustClaim(t, p, "alice", "idle")
	b := MustLaunchBrowser(t)
	for _, dpr := range idleRatios {
		idleConsole(t, b, p, "alice", d.Name, dpr, window, func(size [2]int, in, out int64) {
			kib := func(n int64) float64 { return math.Round(float64(n)/1024/window.Minutes()*10) / 10 }
			fmt.Printf("BENCH idle VNC console %4dx%-4d @%-4v %9.1f KiB/min to the browser %7.1f KiB/min back\n", size[0], size[1], dpr, kib(in), kib(out))
		})
	}
	benchIdlePages(t, b, p, "alice", d.Name, window)
}
