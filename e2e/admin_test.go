package e2e

import (
	"encoding/csv"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// docShot saves a screenshot like screenshot and, with
// CORRAL_E2E_UPDATE_DOCS=1, copies it to docs/ for the README.
func docShot(t *testing.T, page playwright.Page, name string) {
	t.Helper()
	path := screenshot(t, page, name)
	if os.Getenv("CORRAL_E2E_UPDATE_DOCS") != "1" {
		return
	}
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", name+".png"), buf, 0o644); err != nil {
		t.Fatal(err)
	}
}

// memberRow is the dashboard row of a member.
func memberRow(page playwright.Page, member string) playwright.Locator {
	return page.Locator(`[data-testid=member][data-desktop="local/` + member + `"]`)
}

// adminAct clicks a row or pool button, fills the dialog's field when
// input is set, confirms, and waits for the dialog to close.
func adminAct(t *testing.T, page playwright.Page, scope playwright.Locator, action, input string) {
	t.Helper()
	must(t, scope.GetByTestId(action).Click())
	dialog := page.GetByTestId("action-dialog")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	must(t, expect.Locator(dialog).ToBeVisible())
	if input != "" {
		must(t, dialog.GetByTestId("dialog-input").Fill(input))
	}
	must(t, dialog.GetByTestId("dialog-confirm").Click())
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(40000)).Locator(dialog).ToBeHidden())
}

// csvRows reads a CSV export as an admin.
func csvRows(t *testing.T, p *Portal, path string) [][]string {
	t.Helper()
	req, _ := http.NewRequest("GET", p.URL+path, nil)
	req.Header.Set("Tailscale-User-Login", "ops")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	rows, err := csv.NewReader(res.Body).ReadAll()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return rows
}

// auditHas reports whether the audit CSV, read as an admin, has a line
// with every one of parts.
func auditHas(t *testing.T, p *Portal, query string, parts ...string) bool {
	t.Helper()
	req, _ := http.NewRequest("GET", p.URL+"/admin/history/audit.csv?"+query, nil)
	req.Header.Set("Tailscale-User-Login", "ops")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf, _ := io.ReadAll(res.Body)
lines:
	for _, line := range strings.Split(string(buf), "\n") {
		for _, part := range parts {
			if !strings.Contains(line, part) {
				continue lines
			}
		}
		return true
	}
	return false
}

// TestAdmin_DashboardActions walks every admin action in the browser:
// thumbnails, assign, stop and start, force-release with a reason,
// recreate, a view-only console, pool create, resize and delete, and the
// history with filters and CSV.
func TestAdmin_DashboardActions(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_RECLAIM_INTERVAL=2s") // samples for the usage charts
	alices := mustClaim(t, p, "alice", "demo")
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "ops", "/admin")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	must(t, expect.Locator(page.GetByTestId("admin-link")).ToBeVisible())
	must(t, expect.Locator(memberRow(page, alices.Name).GetByTestId("holder")).ToHaveText("alice"))

	t.Run("ThumbnailOfRunningDesktop", func(t *testing.T) {
		img := memberRow(page, alices.Name).GetByTestId("thumb")
		ok := eventually(20*time.Second, func() bool {
			w, err := img.Evaluate("el => el.complete ? el.naturalWidth : 0", nil)
			return err == nil && toInt(w) == 320
		})
		if !ok {
			t.Fatalf("thumbnail of %s did not load as a 320-pixel PNG", alices.Name)
		}
		docShot(t, page, "admin-dashboard")
	})

	var free string
	for _, m := range []string{"demo-1", "demo-2", "demo-3"} {
		if m != alices.Name {
			free = m
			break
		}
	}

	t.Run("AssignToUserByKeyboard", func(t *testing.T) {
		must(t, memberRow(page, free).GetByTestId("assign").Focus())
		must(t, page.Keyboard().Press("Enter"))
		must(t, expect.Locator(page.GetByTestId("dialog-input")).ToBeFocused())
		must(t, page.Keyboard().Type("bob"))
		must(t, page.Keyboard().Press("Enter"))
		must(t, expect.Locator(memberRow(page, free).GetByTestId("holder")).ToHaveText("bob"))
		// Focus comes back to the row, whose Assign became Force-release.
		focusedRow, err := page.Evaluate(`() => document.activeElement.closest('[data-desktop]')?.dataset.desktop`, nil)
		if err != nil || focusedRow != "local/"+free {
			t.Errorf("after assigning, focus is in row %v (%v); want local/%s", focusedRow, err, free)
		}
		if h := holder(t, p, free); h != "bob" {
			t.Errorf("after assigning %s to bob the API says holder %q", free, h)
		}
		if !auditHas(t, p, "user=ops", "assign", free, "to bob") {
			t.Errorf("audit log has no assign of %s to bob", free)
		}
	})

	t.Run("LiveUpdateWithoutReload", func(t *testing.T) {
		_, err := page.Evaluate(`() => { window.notReloaded = true; }`, nil)
		must(t, err)
		d := mustClaim(t, p, "dave", "demo")
		must(t, expect.Locator(memberRow(page, d.Name).GetByTestId("holder")).ToHaveText("dave"))
		if v, err := page.Evaluate(`() => window.notReloaded === true`, nil); err != nil || v != true {
			t.Errorf("the dashboard reloaded to show dave's claim; want a live update")
		}
		home := b.MustNewPage(t, 1280, 800)
		signIn(t, home, p, "dave", "/")
		must(t, expect.Locator(home.GetByTestId("time-left")).ToContainText("Reclaimed in 14 min"))
		must(t, home.Close())
		if code := p.API(t, "dave", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
			t.Fatalf("dave's release: %d", code)
		}
	})

	t.Run("UsageCharts", func(t *testing.T) { testUsageCharts(t, p, page) })
	t.Run("UsageStorm", func(t *testing.T) { testUsageStorm(t, p, page) })

	t.Run("StopAndStart", func(t *testing.T) {
		adminAct(t, page, memberRow(page, free), "stop", "")
		must(t, expect.Locator(memberRow(page, free).GetByTestId("power")).ToHaveText("stopped"))
		adminAct(t, page, memberRow(page, free), "start", "")
		must(t, expect.Locator(memberRow(page, free).GetByTestId("power")).ToHaveText("running"))
	})

	alicePage, _ := openConsole(t, b, p, "alice") // the test's: it outlives the subtests
	t.Run("ViewOnlyConsole", func(t *testing.T) {
		must(t, expect.Locator(memberRow(page, alices.Name).GetByTestId("consoles")).ToContainText("1 vnc · direct"))
		watch := b.MustNewPage(t, 1280, 800)
		signIn(t, watch, p, "ops", "/admin/shadow/local/"+alices.Name)
		must(t, expect.Locator(watch.GetByTestId("status")).ToHaveText("Connected"))
		must(t, expect.Locator(watch.Locator("#screen canvas")).ToBeVisible())
		docShot(t, watch, "admin-watch")
		// Input on a view-only console never reaches the desktop: the
		// portal records no input for the watcher's session.
		box, err := watch.Locator("#screen canvas").BoundingBox()
		must(t, err)
		for i := range 5 {
			must(t, watch.Mouse().Click(box.X+box.Width/2+float64(i*20), box.Y+box.Height/2))
		}
		must(t, watch.Keyboard().Type("hello"))
		if text, _ := alicePage.GetByTestId("status").TextContent(); text != "Connected" {
			t.Errorf("alice's console while ops watches: %q; want still Connected", text)
		}
		must(t, watch.Close())
		var session []string
		ok := eventually(10*time.Second, func() bool {
			rows := csvRows(t, p, "/admin/history/sessions.csv?user=ops")
			if len(rows) > 1 && rows[1][7] != "" {
				session = rows[1]
				return true
			}
			return false
		})
		if !ok {
			t.Fatal("the watcher's session did not close in the history")
		}
		if session[10] != "" || session[8] == "" {
			t.Errorf("watcher's session %q: last_input %q; want none (view only)", session, session[10])
		}
	})

	t.Run("ForceReleaseWithReason", func(t *testing.T) {
		adminAct(t, page, memberRow(page, alices.Name), "release", "host maintenance")
		must(t, expect.Locator(memberRow(page, alices.Name).GetByTestId("holder")).ToHaveText("free"))
		must(t, expect.Locator(alicePage.GetByTestId("status")).ToHaveText("An admin (ops) released this desktop. Reason: host maintenance."))
		if !auditHas(t, p, "user=alice", "force-release", alices.Name, "reason: host maintenance") {
			t.Errorf("audit log has no force-release of %s with the reason", alices.Name)
		}
	})

	t.Run("Recreate", func(t *testing.T) {
		adminAct(t, page, memberRow(page, alices.Name), "recreate", "")
		must(t, expect.Locator(page.GetByTestId("admin-status")).ToHaveText("local/"+alices.Name+" recreated from its source."))
		if !auditHas(t, p, "", "recreate", alices.Name) {
			t.Errorf("audit log has no recreate of %s", alices.Name)
		}
	})

	lab := page.Locator(`[data-testid=admin-pool][data-pool=lab]`)
	t.Run("CreatePool", func(t *testing.T) {
		must(t, page.GetByTestId("new-pool").Click())
		dialog := page.GetByTestId("pool-dialog")
		must(t, dialog.GetByTestId("pool-name").Fill("Bad_Name"))
		must(t, dialog.GetByTestId("pool-size").Fill("2"))
		// The browser's own pattern check stops a bad name; the API refuses it too.
		var e apiError
		if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "<b>x</b>", "size": 1}`, &e); code != 400 || e.Hint == "" {
			t.Errorf("creating a pool named <b>x</b>: %d %+v; want 400 with a hint", code, e)
		}
		must(t, dialog.GetByTestId("pool-name").Fill("lab"))
		must(t, dialog.Locator("[name=idleTimeout]").Fill("1h"))
		docShot(t, page, "admin-new-pool")
		must(t, dialog.GetByTestId("pool-create").Click())
		must(t, expect.Locator(dialog).ToBeHidden())
		must(t, expect.Locator(lab.GetByTestId("pool-counts")).ToContainText("2 members · 2 free"))
		must(t, expect.Locator(lab.GetByTestId("policy")).ToContainText("idle 1h"))
	})

	t.Run("ResizeNeverRemovesClaimed", func(t *testing.T) {
		if code := p.API(t, "carol", "POST", "/api/vdi/pools/local/lab/claim", nil); code != 200 {
			t.Fatalf("carol's claim in lab: %d", code)
		}
		adminAct(t, page, lab, "resize", "3")
		must(t, expect.Locator(lab.GetByTestId("pool-counts")).ToContainText("3 members"))
		must(t, lab.GetByTestId("resize").Click())
		dialog := page.GetByTestId("action-dialog")
		must(t, dialog.GetByTestId("dialog-input").Fill("0"))
		must(t, dialog.GetByTestId("dialog-confirm").Click())
		must(t, expect.Locator(dialog.GetByTestId("dialog-error")).ToContainText("claimed"))
		must(t, dialog.GetByTestId("dialog-cancel").Click())
		adminAct(t, page, lab, "resize", "1")
		must(t, expect.Locator(lab.GetByTestId("pool-counts")).ToContainText("1 member · 0 free · 1 claimed"))
		must(t, expect.Locator(lab.GetByTestId("holder")).ToHaveText("carol"))
	})

	t.Run("DeletePool", func(t *testing.T) {
		must(t, lab.GetByTestId("release").Click())
		must(t, page.GetByTestId("dialog-input").Fill("pool goes away"))
		must(t, page.GetByTestId("dialog-confirm").Click())
		must(t, expect.Locator(lab.GetByTestId("holder")).ToHaveText("free"))
		adminAct(t, page, lab, "delete-pool", "")
		must(t, expect.Locator(lab).ToHaveCount(0))
		if !auditHas(t, p, "", "pool-delete", "lab") {
			t.Errorf("audit log has no pool-delete of lab")
		}
	})

	t.Run("HistoryWithFiltersAndCSV", func(t *testing.T) {
		must(t, page.GetByTestId("history-link").Click())
		must(t, expect.Locator(page.GetByTestId("audit")).ToBeVisible())
		must(t, page.GetByTestId("filter-user").Fill("alice"))
		must(t, page.GetByTestId("filter-apply").Click())
		must(t, expect.Locator(page.GetByTestId("audit-entry").First()).ToContainText("force-release"))
		rows, err := page.GetByTestId("audit-entry").All()
		must(t, err)
		for _, r := range rows {
			text, _ := r.TextContent()
			if !strings.Contains(text, "alice") {
				t.Errorf("audit filtered by alice shows %q", text)
			}
		}
		docShot(t, page, "admin-history")
		dl, err := page.ExpectDownload(func() error { return page.GetByTestId("audit-csv").Click() })
		must(t, err)
		path, err := dl.Path()
		must(t, err)
		buf, _ := os.ReadFile(path)
		if !strings.HasPrefix(string(buf), "id,at,actor,action") || !strings.Contains(string(buf), "force-release") || strings.Contains(string(buf), "pool-create") {
			t.Errorf("audit.csv filtered by alice:\n%s\nwant a header, her force-release and no pool admin", buf)
		}
	})

	t.Run("TabletWidthIsReadable", func(t *testing.T) {
		tablet := b.MustNewPage(t, 768, 1024)
		signIn(t, tablet, p, "ops", "/admin")
		must(t, expect.Locator(tablet.GetByTestId("admin-pool").First()).ToBeVisible())
		screenshot(t, tablet, "admin-tablet")
		if v, err := tablet.Evaluate(`() => [...document.querySelectorAll('.admin .table-scroll')].map((e) => e.scrollWidth - e.clientWidth).filter((d) => d > 1)`, nil); err != nil || len(v.([]any)) > 0 {
			t.Errorf("a pool's members on a 768-pixel tablet are wider than its card by %v px (%v); want none: they scroll sideways", v, err)
		}
	})

	t.Run("PhoneWidthIsReadable", func(t *testing.T) {
		phone := b.MustNewPage(t, 390, 844)
		signIn(t, phone, p, "ops", "/admin")
		must(t, expect.Locator(phone.GetByTestId("admin-pool").First()).ToBeVisible())
		docShot(t, phone, "admin-phone")
		// The table's head is hidden there: each cell names its column.
		if v, err := phone.Evaluate(`() => getComputedStyle(document.querySelector('[data-testid=member] [data-testid=holder]'), '::before').content`, nil); err != nil || v != `"Holder: "` {
			t.Errorf("a member's holder on a 390-pixel phone is introduced by %v (%v); want \"Holder: \"", v, err)
		}
		w, err := phone.Evaluate(`() => document.documentElement.scrollWidth`, nil)
		if err != nil || toInt(w) > 390 {
			t.Errorf("the page is %v pixels wide on a 390-pixel phone (%v); want no sideways scroll", w, err)
		}
		// The admin's name reads whole beside the header's links, and a
		// row's Watch link keeps the line of its buttons' words.
		if cut, err := phone.GetByTestId("whoami").Evaluate(`e => e.scrollWidth > e.clientWidth + 1 ? e.scrollWidth + ' px and has ' + e.clientWidth : null`, nil); err != nil || cut != nil {
			t.Errorf("the admin's name on a 390-pixel phone needs %v px (%v); want it whole", cut, err)
		}
		off, err := phone.Evaluate(`() => {
  const a = document.querySelector('[data-testid=shadow]');
  if (!a) return null;
  const mid = (el) => { const r = document.createRange(); r.selectNodeContents(el); const b = r.getBoundingClientRect(); return b.top + b.height / 2; };
  return mid(a) - mid(a.closest('.row-actions').querySelector('button'));
}`, nil)
		if err != nil || off == nil || math.Abs(toFloat(off)) > 1 {
			t.Errorf("a member's Watch link on a 390-pixel phone has its words %v px off its buttons' (%v); want them on one line", off, err)
		}
		// The history's way back keeps its room above the filters.
		_, err = phone.Goto(p.URL + "/admin/history")
		must(t, err)
		gap, err := phone.Evaluate(`() => document.querySelector('[data-testid=filters]').getBoundingClientRect().top - document.querySelector('.admin-head .button').getBoundingClientRect().bottom`, nil)
		if err != nil || toFloat(gap) < 8 {
			t.Errorf("the history's Back to pools is %v px above its filters on a 390-pixel phone (%v); want 8 or more", gap, err)
		}
		_, err = phone.Goto(p.URL + "/admin")
		must(t, err)
		// An admin on a phone can still make a pool.
		must(t, phone.GetByTestId("new-pool").Click())
		must(t, expect.Locator(phone.GetByTestId("pool-dialog")).ToBeVisible())
		screenshot(t, phone, "admin-phone-new-pool")
		if w, err := phone.Evaluate(`() => document.querySelector('[data-testid=pool-dialog]').getBoundingClientRect().right`, nil); err != nil || toFloat(w) > 390 {
			t.Errorf("the New pool dialog ends at %v px on a 390-pixel phone (%v); want it on the screen", w, err)
		}
	})
}

// TestAdmin_UsersAreRefused: the dashboard, its API and the pool admin
// routes refuse a user who is no admin.
func TestAdmin_UsersAreRefused(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops")
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/vdi/pools", `{"name": "x", "size": 1}`},
		{"PATCH", "/api/vdi/pools/local/demo", `{"size": 1}`},
		{"DELETE", "/api/vdi/pools/local/demo", ""},
		{"POST", "/api/vdi/desktops/local/demo-1/assign", `{"user": "alice"}`},
		{"POST", "/api/vdi/desktops/local/demo-1/recreate", ""},
		{"GET", "/api/vdi/usage?range=week", ""},
	} {
		if code := p.APIBody(t, "alice", c.method, c.path, c.body, nil); code != 403 {
			t.Errorf("%s %s as alice: %d; want 403", c.method, c.path, code)
		}
	}
}
