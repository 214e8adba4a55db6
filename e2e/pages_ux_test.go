package e2e

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 32: pages around the console that never look broken: a full
// pool, an unknown route, the admin's New pool dialog.

// TestConsoleUX_FullPoolReloadNeverClaims: "Get a desktop" on a pool that
// filled meanwhile lands on the home page's notice (a GET); reloading it,
// even once a desktop is free again, claims nothing.
func TestConsoleUX_FullPoolReloadNeverClaims(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	for _, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, "bob", "/")
			get := page.Locator(`[data-pool="demo"]`).GetByTestId("get-desktop")
			must(t, get.WaitFor())
			d := mustClaim(t, p, "carol", "demo")
			must(t, get.Click())
			must(t, page.WaitForURL(regexp.MustCompile(`/\?notice=full&about=local%2Fdemo$`)))
			must(t, expect.Locator(page.GetByTestId("notice")).ToContainText("No desktop of pool local/demo is free right now."))
			if title, _ := page.Title(); !strings.HasPrefix(title, "My desktops") {
				t.Errorf("title %q; want the home page's", title)
			}
			noOverflow(t, page)
			screenshot(t, page, "pool-full")
			if code := p.API(t, "carol", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
				t.Fatalf("carol releases: %d", code)
			}
			_, err := page.Reload()
			must(t, err)
			must(t, expect.Locator(page.GetByTestId("notice")).ToBeVisible())
			var mine []desktop
			p.API(t, "bob", "GET", "/api/vdi/desktops", &mine)
			if len(mine) != 0 {
				t.Errorf("reloading the full-pool page claimed %d desktops for bob", len(mine))
			}
		})
	}
}

// TestConsoleUX_NotFoundPage: every unknown route answers an HTML page
// with the header and a way home (signed in or not); /favicon.ico is the
// portal's icon.
func TestConsoleUX_NotFoundPage(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0")
	b := MustLaunchBrowser(t)
	for _, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, "alice", "/")
			res, err := page.Goto(p.URL + "/no/such/page")
			must(t, err)
			if res.Status() != 404 {
				t.Errorf("unknown route: %d; want 404", res.Status())
			}
			expect := playwright.NewPlaywrightAssertions(testwait.MS(5000))
			must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText("alice"))
			must(t, expect.Locator(page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "Back to my desktops"})).ToBeVisible())
			if title, _ := page.Title(); title != "Page not found · corral" {
				t.Errorf("title %q; want words", title)
			}
			noOverflow(t, page)
			screenshot(t, page, "404")
		})
	}
	res, err := http.Get(p.URL + "/favicon.ico")
	must(t, err)
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.Contains(string(body), "<svg") {
		t.Errorf("/favicon.ico: %d %q; want the portal's icon", res.StatusCode, fmt.Sprintf("%.40s", body))
	}
}

// TestConsoleUX_AdminPoolDialog: on the local backend the New pool dialog
// asks nothing the backend cannot use (namespace, golden source, Windows
// licences), fits a 1280x800 screen with Create in view, and a pool's
// Policy button edits its whole policy later (audited).
func TestConsoleUX_AdminPoolDialog(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "ops", "/admin")
	must(t, page.GetByTestId("new-pool").Click())
	dialog := page.GetByTestId("pool-dialog")
	must(t, expect.Locator(dialog).ToBeVisible())
	for _, id := range []string{"pool-namespace", "pool-source", "pool-licenses"} {
		if n, _ := dialog.GetByTestId(id).Count(); n != 0 {
			t.Errorf("the local backend's New pool dialog shows %s", id)
		}
	}
	// Local desktops move files through the Files panel, so the choice is there.
	must(t, expect.Locator(dialog.GetByTestId("pool-file-transfer")).ToBeVisible())
	box, err := dialog.GetByTestId("pool-create").BoundingBox()
	must(t, err)
	if box == nil || box.Y+box.Height > 800 {
		t.Errorf("Create is at %+v: off a 1280x800 screen", box)
	}
	screenshot(t, page, "new-pool")
	must(t, dialog.GetByTestId("pool-name").Fill("lab"))
	must(t, dialog.GetByTestId("pool-size").Fill("1"))
	_, err = dialog.GetByTestId("pool-watch").SelectOption(playwright.SelectOptionValues{Values: &[]string{"consent"}})
	must(t, err)
	must(t, dialog.GetByTestId("pool-create").Click())
	must(t, expect.Locator(dialog).ToBeHidden())
	lab := page.Locator(`[data-testid=admin-pool][data-pool=lab]`)
	must(t, expect.Locator(lab.GetByTestId("pool-counts")).ToContainText("1 member · 1 free"))
	must(t, expect.Locator(lab.GetByTestId("console-policy")).ToContainText("watching only with the user's consent"))
	// A local pool's consoles move files through the Files panel.
	must(t, expect.Locator(lab.GetByTestId("console-policy")).ToContainText("file transfer on"))

	must(t, lab.GetByTestId("edit-policy").Click())
	must(t, expect.Locator(dialog.Locator("#pool-title")).ToHaveText("Policy of pool lab"))
	must(t, expect.Locator(dialog.GetByTestId("pool-watch")).ToHaveValue("consent"))
	must(t, expect.Locator(dialog.GetByTestId("pool-name")).ToBeHidden())
	must(t, dialog.Locator("[name=idleTimeout]").Fill("2h"))
	_, err = dialog.GetByTestId("pool-clipboard").SelectOption(playwright.SelectOptionValues{Values: &[]string{"off"}})
	must(t, err)
	screenshot(t, page, "edit-policy")
	must(t, dialog.GetByTestId("pool-create").Click())
	must(t, expect.Locator(dialog).ToBeHidden())
	must(t, expect.Locator(lab.GetByTestId("policy")).ToContainText("idle 2h"))
	must(t, expect.Locator(lab.GetByTestId("console-policy")).ToContainText("clipboard off"))
	must(t, expect.Locator(lab.GetByTestId("console-policy")).ToContainText("consent"))
	if !auditHas(t, p, "", "pool-policy", "lab", "clipboard off", "watch consent") {
		t.Error("the audit log has no pool-policy row for lab's edit")
	}
	// On a phone the dashboard's cards do not scroll sideways.
	must(t, page.SetViewportSize(390, 844))
	noOverflow(t, page)
	if v, err := page.Evaluate(`() => [...document.querySelectorAll('.admin .table-scroll')].some((e) => e.scrollWidth > e.clientWidth + 1)`); err != nil || v == true {
		t.Errorf("a pool card's table scrolls sideways on a phone (%v)", err)
	}
	screenshot(t, page, "dashboard-phone")
}
