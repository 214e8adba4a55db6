package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// Browser is a headless Debian Chromium driven by Playwright.
type Browser struct {
	pw      *playwright.Playwright
	browser playwright.Browser
}

// MustLaunchBrowser starts Playwright's driver from node_modules (npm's
// playwright-core, pinned in package.json) and Debian's Chromium.
func MustLaunchBrowser(tb testing.TB) *Browser {
	tb.Helper()
	return MustLaunchBrowserWith(tb)
}

// MustLaunchBrowserWith is MustLaunchBrowser with extra Chromium flags
// (e.g. --host-resolver-rules).
func MustLaunchBrowserWith(tb testing.TB, flags ...string) *Browser {
	tb.Helper()
	pw := mustRunPlaywright(tb)
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String("/usr/bin/chromium"),
		Headless:       playwright.Bool(true),
		Args:           append(chromiumFlags(), flags...),
	})
	if err != nil {
		pw.Stop()
		tb.Fatalf("launch Chromium (apt-get install chromium): %v", err)
	}
	br := &Browser{pw: pw, browser: b}
	tb.Cleanup(func() {
		b.Close()
		pw.Stop()
	})
	return br
}

// MustLaunchProfile starts Chromium on a profile of its own in a fresh
// folder, kept on disk like a user's browser: its HTTP cache and the
// code cache of compiled scripts and wasm survive from page to page, which
// the incognito-like contexts of MustNewPage do not keep.
func MustLaunchProfile(tb testing.TB, width, height int) playwright.BrowserContext {
	tb.Helper()
	pw := mustRunPlaywright(tb)
	ctx, err := pw.Chromium.LaunchPersistentContext(tb.TempDir(), playwright.BrowserTypeLaunchPersistentContextOptions{
		ExecutablePath: playwright.String("/usr/bin/chromium"),
		Headless:       playwright.Bool(true),
		Args:           chromiumFlags(),
		Viewport:       &playwright.Size{Width: width, Height: height},
	})
	if err != nil {
		pw.Stop()
		tb.Fatalf("launch Chromium (apt-get install chromium): %v", err)
	}
	tb.Cleanup(func() {
		ctx.Close()
		pw.Stop()
	})
	return ctx
}

// chromiumFlags are the flags every test browser runs with.
func chromiumFlags() []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync"}
}

// mustRunPlaywright starts Playwright's driver from node_modules (npm's
// playwright-core, pinned in package.json).
func mustRunPlaywright(tb testing.TB) *playwright.Playwright {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..")
	cli := filepath.Join(root, "node_modules", "playwright-core", "cli.js")
	if _, err := os.Stat(cli); err != nil {
		tb.Fatalf("Playwright driver missing (%v): run `make assets` (npm ci) first", err)
	}
	tb.Setenv("PLAYWRIGHT_CLI_PATH", cli)
	node := "/usr/bin/node"
	if p := os.Getenv("PLAYWRIGHT_NODEJS_PATH"); p != "" {
		node = p
	}
	tb.Setenv("PLAYWRIGHT_NODEJS_PATH", node)
	pw, err := playwright.Run(&playwright.RunOptions{SkipInstallBrowsers: true, Verbose: false})
	if err != nil {
		tb.Fatalf("start Playwright: %v", err)
	}
	return pw
}

// MustNewPage opens a page in a fresh context (own cookies) of the given size.
func (b *Browser) MustNewPage(tb testing.TB, width, height int) playwright.Page {
	tb.Helper()
	ctx, err := b.browser.NewContext(playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: width, Height: height},
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ctx.Close() })
	page, err := ctx.NewPage()
	if err != nil {
		tb.Fatal(err)
	}
	page.SetDefaultTimeout(15000)
	keepBrowserErrors(tb, page, fmt.Sprintf("%dx%d", width, height))
	return page
}

// keepBrowserErrors logs the page's console errors and warnings and its
// uncaught exceptions when the test fails: what the browser saw is often
// the only clue to why a console closed.
func keepBrowserErrors(tb testing.TB, page playwright.Page, size string) {
	var mu sync.Mutex
	var lines []string
	keep := func(line string) {
		mu.Lock()
		defer mu.Unlock()
		if len(lines) < 200 {
			lines = append(lines, time.Now().Format("15:04:05.000")+" "+line)
		}
	}
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if m.Type() == "error" || m.Type() == "warning" {
			keep(m.Type() + ": " + m.Text())
		}
	})
	page.OnPageError(func(err error) { keep("uncaught: " + err.Error()) })
	tb.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		if tb.Failed() && len(lines) > 0 {
			tb.Logf("browser console (%s page):\n%s", size, strings.Join(lines, "\n"))
		}
	})
}

// screenshot saves a full-page screenshot under e2e/output/ (gitignored)
// and returns its path.
func screenshot(tb testing.TB, page playwright.Page, name string) string {
	tb.Helper()
	dir := filepath.Join("output", tb.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	if _, err := page.Screenshot(playwright.PageScreenshotOptions{Path: playwright.String(path), FullPage: playwright.Bool(true)}); err != nil {
		tb.Fatalf("screenshot %s: %v", name, err)
	}
	return path
}
