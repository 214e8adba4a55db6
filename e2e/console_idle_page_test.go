package e2e

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// idleConsoles are the consoles whose whole page is measured at rest.
var idleConsoles = []string{"vnc", "rdp", "terminal"}

// idleSettle is how long a console page is left open before its rest is
// measured: Auto's last round-trip measure is 10 s after the VNC console
// opens (vnc-quality.js).
const idleSettle = 15 * time.Second

// pageBytes counts, as Chromium sees them, what a page moves each way:
// its websockets' data frames and its HTTP requests and responses,
// headers and bodies. A websocket ping and its pong (the portal's
// keepalive, a few bytes every 20 s) are not frames here.
type pageBytes struct {
	mu      sync.Mutex
	in, out int64
	what    map[string]int64 // bytes per websocket or request URL path
}

// countPageBytes counts page's traffic from now on.
func countPageBytes(page playwright.Page) *pageBytes {
	n := &pageBytes{what: map[string]int64{}}
	add := func(what string, in, out int64) {
		n.mu.Lock()
		defer n.mu.Unlock()
		n.in += in
		n.out += out
		n.what[what] += in + out
	}
	page.OnWebSocket(func(ws playwright.WebSocket) {
		what := "ws " + urlPath(ws.URL())
		ws.OnFrameReceived(func(b []byte) { add(what, int64(len(b)), 0) })
		ws.OnFrameSent(func(b []byte) { add(what, 0, int64(len(b))) })
	})
	page.OnRequestFinished(func(r playwright.Request) {
		s, err := r.Sizes()
		if err != nil || s == nil {
			return
		}
		add(r.Method()+" "+urlPath(r.URL()), int64(s.ResponseHeadersSize+s.ResponseBodySize), int64(s.RequestHeadersSize+s.RequestBodySize))
	})
	return n
}

// take returns the bytes each way since the last take and what moved them.
func (n *pageBytes) take() (in, out int64, what string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var lines []string
	for k, v := range n.what {
		lines = append(lines, fmt.Sprintf("%s: %d bytes", k, v))
	}
	sort.Strings(lines)
	in, out = n.in, n.out
	n.in, n.out, n.what = 0, 0, map[string]int64{}
	return in, out, strings.Join(lines, "; ")
}

// urlPath is u without its scheme, host and query.
func urlPath(u string) string {
	if i := strings.Index(u, "://"); i >= 0 {
		u = u[i+3:]
		if j := strings.IndexByte(u, '/'); j >= 0 {
			u = u[j:]
		}
	}
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	return u
}

// restingConsole is one console page to leave at rest: member's console of
// protocol, opened as user.
type restingConsole struct{ user, member, protocol string }

// idleBytes is what an idle console page moved over the window: bytes
// each way, and what moved them.
type idleBytes struct {
	in, out int64
	what    string
}

// idlePage opens member's console of protocol as user at 1280x800, leaves
// it at rest for idleSettle and returns the whole page's bytes each way
// over the next window, and what moved them.
func idlePage(t *testing.T, b *Browser, p *Portal, user, member, protocol string, window time.Duration) (in, out int64, what string) {
	t.Helper()
	got := idlePages(t, b, p, []restingConsole{{user, member, protocol}}, window)[0]
	return got.in, got.out, got.what
}

// idlePages is idlePage for several console pages at once, each in a
// browser context of its own (closed on return), measured over the same
// window: the rests overlap instead of following each other.
func idlePages(t *testing.T, b *Browser, p *Portal, consoles []restingConsole, window time.Duration) []idleBytes {
	t.Helper()
	pages := make([]playwright.Page, len(consoles))
	counts := make([]*pageBytes, len(consoles))
	var opened time.Time
	for i, c := range consoles {
		ctx, err := b.Chromium.NewContext(playwright.BrowserNewContextOptions{Viewport: &playwright.Size{Width: 1280, Height: 800}})
		must(t, err)
		defer ctx.Close() // the next console of the same user takes its place
		page, err := ctx.NewPage()
		must(t, err)
		page.SetDefaultTimeout(testwait.MS(15000))
		keepBrowserErrors(t, page, c.protocol)
		counts[i] = countPageBytes(page)
		opened = time.Now()
		signIn(t, page, p, c.user, "/desktops/local/"+c.member+"?protocol="+c.protocol)
		pages[i] = page
	}
	for _, page := range pages {
		// IronRDP compiles 4 MB of wasm first: seconds on a busy machine. A
		// serial console says how to log in once connected.
		must(t, playwright.NewPlaywrightAssertions(testwait.MS(60000)).Locator(page.GetByTestId("status")).ToHaveText(regexp.MustCompile(`^Connected|log in as`)))
	}
	time.Sleep(time.Until(opened.Add(idleSettle))) // the last page's settle
	for _, n := range counts {
		n.take()
	}
	time.Sleep(window)
	got := make([]idleBytes, len(consoles))
	for i, n := range counts {
		got[i].in, got[i].out, got[i].what = n.take()
	}
	for i, page := range pages {
		screenshot(t, page, "idle-"+consoles[i].protocol)
	}
	return got
}

// TestConsole_IdlePageBytes: a console page at rest (VNC, RDP through the
// RDCleanPath gateway, the desktop's terminal) moves nothing to the browser
// or back but keepalives. The console streams themselves were quiet; the
// page was not: the connection chip timed a request every 5 s and the
// reclaim banner asked for the desktop every 15 s, ~9 KiB/min to the
// browser and ~15 KiB/min back (the "RDP idle 7 KiB/min" of the WAN table).
// The three pages rest at once, each on a desktop of its own.
func TestConsole_IdlePageBytes(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", fmt.Sprintf(`{"name": "idle", "size": %d}`, len(idleConsoles)), nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	var consoles []restingConsole
	for _, protocol := range idleConsoles {
		user := "alice-" + protocol
		consoles = append(consoles, restingConsole{user, mustClaim(t, p, user, "idle").Name, protocol})
	}
	b := MustLaunchBrowser(t)
	window := 30 * time.Second
	got := idlePages(t, b, p, consoles, window)
	for i, protocol := range idleConsoles {
		t.Run(protocol, func(t *testing.T) {
			restful(t, protocol, got[i], window)
		})
	}
}

// atRest measures member's console page of protocol at rest (idlePage)
// and fails unless it moved keepalives only.
func atRest(t *testing.T, b *Browser, p *Portal, user, member, protocol string, window time.Duration) {
	t.Helper()
	restful(t, protocol, idlePages(t, b, p, []restingConsole{{user, member, protocol}}, window)[0], window)
}

// restful fails unless a console page of protocol moved keepalives only
// at rest (got, over window).
func restful(t *testing.T, protocol string, got idleBytes, window time.Duration) {
	t.Helper()
	t.Logf("%s: %d bytes in, %d out over %v at rest (%s)", protocol, got.in, got.out, window, got.what)
	if perMin := float64(got.in+got.out) / window.Minutes(); perMin > idleBudget {
		t.Errorf("an idle %s console page moved %d bytes to the browser and %d back in %v (%.1f KiB/min: %s); want keepalives only (<= %d KiB/min)",
			protocol, got.in, got.out, window, perMin/1024, got.what, idleBudget>>10)
	}
}

// benchIdlePages prints, for `make bench`, each idle console page's bytes
// per minute, for TestBench_IdleConsole.
func benchIdlePages(t *testing.T, b *Browser, p *Portal, user, member string, window time.Duration) {
	for _, protocol := range idleConsoles {
		in, out, _ := idlePage(t, b, p, user, member, protocol, window)
		kib := func(n int64) float64 { return math.Round(float64(n)/1024/window.Minutes()*10) / 10 }
		fmt.Printf("BENCH idle %-8s console page 1280x800 %9.1f KiB/min to the browser %7.1f KiB/min back\n", protocol, kib(in), kib(out))
	}
}
