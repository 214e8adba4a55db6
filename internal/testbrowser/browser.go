// Package testbrowser drives a headless Chromium with Playwright for the
// tests that look at the portal's pages (the e2e package, and the kube
// package's run on KubeVirt's control plane): npm's playwright-core from
// node_modules (pinned in package.json) and Debian's Chromium.
package testbrowser

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

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Browser is a headless Debian Chromium driven by Playwright.
type Browser struct {
	// Chromium is the browser, for a context with options of the test's
	// own (MustNewPage's are plain).
	Chromium playwright.Browser
	pw       *playwright.Playwright
}

// MustLaunch starts Playwright's driver and Chromium with extra flags
// (e.g. --host-resolver-rules); both stop when tb ends.
func MustLaunch(tb testing.TB, flags ...string) *Browser {
	tb.Helper()
	pw := MustRunPlaywright(tb)
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String("/usr/bin/chromium"),
		Headless:       playwright.Bool(true),
		Args:           append(Flags(), flags...),
	})
	if err != nil {
		pw.Stop()
		tb.Fatalf("launch Chromium (apt-get install chromium): %v", err)
	}
	tb.Cleanup(func() {
		b.Close()
		pw.Stop()
	})
	return &Browser{Chromium: b, pw: pw}
}

// MustLaunchProfile starts Chromium on a profile of its own in a fresh
// folder, kept on disk like a user's browser: its HTTP cache and the
// code cache of compiled scripts and wasm survive from page to page, which
// the incognito-like contexts of MustNewPage do not keep.
func MustLaunchProfile(tb testing.TB, width, height int) playwright.BrowserContext {
	tb.Helper()
	pw := MustRunPlaywright(tb)
	ctx, err := pw.Chromium.LaunchPersistentContext(tb.TempDir(), playwright.BrowserTypeLaunchPersistentContextOptions{
		ExecutablePath: playwright.String("/usr/bin/chromium"),
		Headless:       playwright.Bool(true),
		Args:           Flags(),
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

// Flags are the flags every test browser runs with.
func Flags() []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync"}
}

// MustRunPlaywright starts Playwright's driver from node_modules (npm's
// playwright-core, pinned in package.json), for a browser launched in a
// way of the test's own; the caller stops it.
func MustRunPlaywright(tb testing.TB) *playwright.Playwright {
	tb.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..")
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
	page := b.mustNewPage(tb, playwright.BrowserNewContextOptions{
		Viewport: &playwright.Size{Width: width, Height: height},
	})
	KeepErrors(tb, page, fmt.Sprintf("%dx%d", width, height))
	return page
}

// MustNewPhonePage opens a page in a fresh context that is a touch device
// of the given size, as a phone or tablet browser is.
func (b *Browser) MustNewPhonePage(tb testing.TB, width, height int) playwright.Page {
	tb.Helper()
	return b.mustNewPage(tb, playwright.BrowserNewContextOptions{
		Viewport:          &playwright.Size{Width: width, Height: height},
		HasTouch:          playwright.Bool(true),
		IsMobile:          playwright.Bool(true),
		DeviceScaleFactor: playwright.Float(2),
	})
}

// mustNewPage opens a page in a fresh context of opts, closed when tb
// ends.
func (b *Browser) mustNewPage(tb testing.TB, opts playwright.BrowserNewContextOptions) playwright.Page {
	tb.Helper()
	ctx, err := b.Chromium.NewContext(opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ctx.Close() })
	page, err := ctx.NewPage()
	if err != nil {
		tb.Fatal(err)
	}
	page.SetDefaultTimeout(testwait.MS(15000))
	return page
}

// KeepErrors logs the page's console errors and warnings and its
// uncaught exceptions when the test fails: what the browser saw is often
// the only clue to why a console closed. label names the page.
func KeepErrors(tb testing.TB, page playwright.Page, label string) {
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
			tb.Logf("browser console (%s page):\n%s", label, strings.Join(lines, "\n"))
		}
	})
}
