package e2e

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// wasmURL matches the IronRDP wasm's URL: its own content-hashed file in the
// hashed ironrdp folder.
var wasmURL = regexp.MustCompile(`/static/ironrdp\.[0-9a-f]{12}/ironrdp\.[0-9a-f]{16}\.wasm$`)

// TestRDP_WasmOwnFile: the RDP client's wasm is not a data: URL inside its
// JavaScript but a file of its own at a content-hashed URL, served as
// application/wasm and cached for a year; the home page prefetches it while
// the user picks a pool, the console page preloads the client's modules,
// and with all that under the portal's CSP (wasm-unsafe-eval, no data:
// fetches) the RDP console still signs in and draws the desktop, on a
// first visit and again from the browser's cache.
func TestRDP_WasmOwnFile(t *testing.T) {
	portal := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000))
	must(t, page.AddInitScript(playwright.Script{Content: playwright.String(cspWatch)}))
	var mu sync.Mutex
	var console []string
	var wasm []playwright.Response
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" && strings.Contains(m.Text(), "Content Security Policy") {
			mu.Lock()
			console = append(console, m.Text())
			mu.Unlock()
		}
	})
	page.OnResponse(func(r playwright.Response) {
		if strings.HasSuffix(r.URL(), ".wasm") {
			mu.Lock()
			wasm = append(wasm, r)
			mu.Unlock()
		}
	})

	member := rdpSignIn(t, portal, page, "alice")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	drawnRDP(t, page, "first visit")

	// The console page preloaded the client and the home page prefetched
	// its wasm (the browser may have fetched it then or now: either way
	// there is one URL, hashed, with the headers below).
	html := fetchPage(t, portal, "alice", "/desktops/local/"+member+"?protocol=rdp")
	for _, want := range []string{`rel="modulepreload"`, `iron-remote-desktop-rdp.js"`, `data-likely="rdp"`} {
		if !strings.Contains(html, want) {
			t.Errorf("console page lacks %s", want)
		}
	}
	home := fetchPage(t, portal, "alice", "/")
	prefetch := regexp.MustCompile(`<link rel="prefetch" href="([^"]+\.wasm)"`).FindStringSubmatch(home)
	if prefetch == nil || !wasmURL.MatchString(prefetch[1]) {
		t.Fatalf("home page prefetches no hashed wasm (%q)", prefetch)
	}
	mu.Lock()
	seen := append([]playwright.Response{}, wasm...)
	mu.Unlock()
	if len(seen) == 0 {
		t.Fatal("the RDP console connected without fetching a .wasm file: is the wasm still inlined?")
	}
	for _, r := range seen {
		if !strings.HasSuffix(r.URL(), prefetch[1]) {
			t.Errorf("wasm fetched from %s; want the prefetched %s", r.URL(), prefetch[1])
		}
	}

	res, err := http.Get(portal.URL + prefetch[1])
	must(t, err)
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for header, want := range map[string]string{
		"Content-Type":  "application/wasm",
		"Cache-Control": "public, max-age=31536000, immutable",
	} {
		if got := res.Header.Get(header); res.StatusCode != 200 || got != want {
			t.Errorf("GET %s: %d, %s %q; want 200, %q", prefetch[1], res.StatusCode, header, got, want)
		}
	}
	if len(body) < 1<<20 || string(body[:4]) != "\x00asm" {
		t.Errorf("GET %s: %d bytes starting %q; want a wasm module of megabytes", prefetch[1], len(body), body[:min(4, len(body))])
	}
	backend := regexp.MustCompile(`data-ironrdp-backend="([^"]+)"`).FindStringSubmatch(html)
	if backend == nil {
		t.Fatal("console page names no IronRDP backend")
	}
	js := fetchPage(t, portal, "alice", backend[1])
	if strings.Contains(js, "data:application/wasm") || len(js) > 1<<20 {
		t.Errorf("the IronRDP backend (%d bytes) still carries its wasm inline", len(js))
	}
	csp := res.Header.Get("Content-Security-Policy")
	if strings.Contains(csp, "'unsafe-eval'") || !strings.Contains(csp, "script-src 'self' 'wasm-unsafe-eval';") || !strings.Contains(csp, "connect-src 'self';") {
		t.Errorf("CSP %q; want wasm-unsafe-eval, no unsafe-eval and no data: fetches", csp)
	}

	// Again, with the client in the browser's cache.
	_, err = page.Reload()
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	drawnRDP(t, page, "from the cache")
	time.Sleep(300 * time.Millisecond) // a late violation gets its chance
	if got := cspViolations(t, page, &console, &mu); len(got) > 0 {
		t.Errorf("CSP violations on the RDP console: %q", got)
	}
	if v, err := page.Evaluate(`() => performance.getEntriesByType('measure').map(m => m.name + ' ' + Math.round(m.duration) + 'ms').join(', ')`); err == nil {
		t.Logf("in the page, from the cache: %v", v)
	}
}

// drawnRDP waits until IronRDP has drawn the desktop on page.
func drawnRDP(t *testing.T, page playwright.Page, when string) {
	t.Helper()
	desk := page.Locator("iron-remote-desktop")
	for end := time.Now().Add(testwait.D(15 * time.Second)); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
		b, err := desk.Screenshot()
		must(t, err)
		if rdpColours(t, b) > 20 {
			return
		}
	}
	screenshot(t, page, "rdp-blank")
	t.Fatalf("%s: IronRDP drew no desktop in 15s", when)
}

// fetchPage GETs path as user (the Tailscale header, trusted from loopback)
// and returns the body.
func fetchPage(t *testing.T, p *Portal, user, path string) string {
	t.Helper()
	req, err := http.NewRequest("GET", p.URL+path, nil)
	must(t, err)
	req.Header.Set("Tailscale-User-Login", user)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	must(t, err)
	if res.StatusCode != 200 {
		t.Fatalf("GET %s: %d", path, res.StatusCode)
	}
	return string(b)
}
