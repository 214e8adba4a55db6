package e2e

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// axeScript is axe-core from npm (package.json), injected into each page.
const axeScript = "../node_modules/axe-core/axe.min.js"

// axeViolation is one rule axe-core found broken, with where.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// axeCheck runs axe-core on page (named what) and fails the test for every
// serious or critical violation, naming the rule and the elements.
func axeCheck(t *testing.T, page playwright.Page, what string) {
	t.Helper()
	src, err := os.ReadFile(axeScript)
	if err != nil {
		t.Fatalf("axe-core is not installed (npm): %v", err)
	}
	if _, err := page.AddScriptTag(playwright.PageAddScriptTagOptions{Content: playwright.String(string(src))}); err != nil {
		t.Fatalf("%s: inject axe-core: %v", what, err)
	}
	v, err := page.Evaluate(`async () => JSON.stringify((await axe.run(document, { resultTypes: ['violations'] })).violations)`)
	if err != nil {
		t.Fatalf("%s: axe-core: %v", what, err)
	}
	var found []axeViolation
	must(t, json.Unmarshal([]byte(v.(string)), &found))
	for _, f := range found {
		if f.Impact != "serious" && f.Impact != "critical" {
			continue
		}
		var where []string
		for i, n := range f.Nodes {
			if i == 4 {
				where = append(where, "…")
				break
			}
			b, _ := json.Marshal(n.Target)
			where = append(where, string(b)+": "+strings.ReplaceAll(n.Summary, "\n", " "))
		}
		t.Errorf("%s: axe %s (%s): %s\n\t%s", what, f.ID, f.Impact, f.Help, strings.Join(where, "\n\t"))
	}
	screenshot(t, page, strings.NewReplacer("/", "-", " ", "-").Replace(what))
}

// axePage opens a laptop-sized page whose context lets axe-core's script
// in despite the portal's Content-Security-Policy.
func axePage(t *testing.T, b *Browser) playwright.Page {
	t.Helper()
	ctx, err := b.Chromium.NewContext(playwright.BrowserNewContextOptions{
		Viewport:  &playwright.Size{Width: 1280, Height: 800},
		BypassCSP: playwright.Bool(true),
	})
	must(t, err)
	t.Cleanup(func() { ctx.Close() })
	page, err := ctx.NewPage()
	must(t, err)
	page.SetDefaultTimeout(testwait.MS(15000))
	return page
}

// TestA11y_EveryPage: issue 58. axe-core finds no serious or critical
// violation on any page of the portal, as each kind of user sees it: the
// sign-in page, home, the VNC, RDP and terminal consoles, the kiosk, the
// shared and admin watch pages, My sessions and a recording's player, the
// tokens page, the admin dashboard, history and recordings, and the
// error pages. One portal, one laptop-sized browser.
func TestA11y_EveryPage(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=4", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000))
	rec := ownRecordedTerminal(t, p, "ops", "mine", "alice", "echo a11y-$((20+22))", "a11y-42")
	d := mustClaim(t, p, "alice", "demo")
	if code := p.APIBody(t, "alice", "POST", "/api/vdi/desktops/local/"+d.Name+"/shares", `{"user":"bob","expires":"30m"}`, nil); code != 201 {
		t.Fatalf("alice invites bob: %d", code)
	}
	open := func(t *testing.T, user, path string) playwright.Page {
		t.Helper()
		page := axePage(t, b)
		signIn(t, page, p, user, path)
		return page
	}
	connected := func(t *testing.T, page playwright.Page) {
		t.Helper()
		must(t, expect.Locator(page.GetByTestId("status")).ToContainText("Connected"))
	}

	t.Run("signin", func(t *testing.T) {
		page := axePage(t, b)
		_, err := page.Goto(p.URL + "/signin")
		must(t, err)
		axeCheck(t, page, "signin")
	})
	t.Run("home", func(t *testing.T) {
		axeCheck(t, open(t, "alice", "/"), "home")
	})
	t.Run("shared with me", func(t *testing.T) {
		axeCheck(t, open(t, "bob", "/"), "home-shared")
	})
	for _, c := range []struct{ name, query string }{{"vnc", ""}, {"rdp", "?protocol=rdp"}, {"terminal", "?protocol=terminal"}} {
		t.Run("console/"+c.name, func(t *testing.T) {
			page := open(t, "alice", "/desktops/local/"+d.Name+c.query)
			connected(t, page)
			axeCheck(t, page, "console-"+c.name)
		})
	}
	t.Run("shared", func(t *testing.T) {
		page := open(t, "bob", "/shared/local/"+d.Name)
		connected(t, page)
		axeCheck(t, page, "shared")
	})
	t.Run("admin watch", func(t *testing.T) {
		page := open(t, "ops", "/admin/shadow/local/"+d.Name)
		connected(t, page)
		axeCheck(t, page, "admin-watch")
	})
	t.Run("kiosk", func(t *testing.T) {
		page := open(t, "kim", "/kiosk/demo")
		connected(t, page)
		axeCheck(t, page, "kiosk")
	})
	t.Run("my sessions", func(t *testing.T) {
		axeCheck(t, open(t, "alice", "/history"), "my-sessions")
	})
	t.Run("player", func(t *testing.T) {
		page := open(t, "alice", "/history/recordings/"+rec)
		must(t, expect.Locator(page.GetByTestId("player")).ToHaveAttribute("data-state", "ready"))
		axeCheck(t, page, "player")
	})
	t.Run("tokens", func(t *testing.T) {
		axeCheck(t, open(t, "alice", "/tokens"), "tokens")
	})
	t.Run("admin", func(t *testing.T) {
		axeCheck(t, open(t, "ops", "/admin"), "admin")
	})
	for _, path := range []string{"/admin/history", "/admin/recordings", "/admin/recordings/" + rec} {
		t.Run(path, func(t *testing.T) {
			axeCheck(t, open(t, "ops", path), strings.TrimPrefix(path, "/"))
		})
	}
	// Two layout faults found on the way, on a phone: every members
	// table lost its first header (the dashboard's screens column rule),
	// and the desktop sat between two dark bands instead of under the bar.
	t.Run("phone/my sessions", func(t *testing.T) {
		page := b.MustNewPhonePage(t, 390, 844)
		signIn(t, page, p, "alice", "/history")
		must(t, expect.Locator(page.GetByTestId("my-sessions").Locator("th").First()).ToBeVisible())
		screenshot(t, page, "my-sessions")
	})
	t.Run("phone/console", func(t *testing.T) {
		page := b.MustNewPhonePage(t, 390, 844)
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
		connected(t, page)
		gap := func() float64 {
			v, err := page.Evaluate(`() => document.querySelector('#screen canvas').getBoundingClientRect().top - document.querySelector('.console-bar').getBoundingClientRect().bottom`)
			must(t, err)
			return toFloat(v)
		}
		if !eventually(10*time.Second, func() bool { return gap() < 2 }) {
			t.Errorf("on a phone the desktop starts %.0f px below the bar; want it right under it", gap())
		}
		screenshot(t, page, "console")
	})
	t.Run("errors", func(t *testing.T) {
		axeCheck(t, open(t, "alice", "/no/such/page"), "not-found")
		axeCheck(t, open(t, "mallory", "/desktops/local/"+d.Name), "forbidden")
	})
}
