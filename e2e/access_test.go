package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// poolNames returns the names of the pools user sees.
func poolNames(t *testing.T, p *Portal, user string) []string {
	t.Helper()
	var pools []pool
	if code := p.API(t, user, "GET", "/api/vdi/pools", &pools); code != 200 {
		t.Fatalf("pools as %s: %d", user, code)
	}
	var out []string
	for _, pl := range pools {
		out = append(out, pl.Name)
	}
	return out
}

// TestAccess_GroupPoolAndQuota runs a pool entitled to a group from the
// groups file on the real binary: others neither see nor claim it (the
// API, the home page and its kiosk link say why), members do, widening it
// takes effect at once, narrowing it leaves held desktops working, and the
// per-user quota refuses a claim with the desktops the user holds.
func TestAccess_GroupPoolAndQuota(t *testing.T) {
	groups := filepath.Join(t.TempDir(), "groups.yaml")
	must(t, os.WriteFile(groups, []byte("finance: [alice]\n"), 0o600))
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_ADMINS=ops",
		"CORRAL_VDI_GROUPS_FILE="+groups, "CORRAL_VDI_MAX_DESKTOPS_PER_USER=1")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "fin", "size": 2, "access": {"groups": ["finance"]}}`, nil); code != 201 {
		t.Fatalf("create pool fin: %d", code)
	}

	t.Run("OthersNeitherSeeNorClaim", func(t *testing.T) {
		if got := poolNames(t, p, "bob"); strings.Contains(strings.Join(got, ","), "fin") {
			t.Errorf("bob sees pools %v; want fin hidden", got)
		}
		var e apiError
		if code := p.API(t, "bob", "POST", "/api/vdi/pools/local/fin/claim", &e); code != 403 || !strings.Contains(e.Error, "group finance") || e.Hint == "" {
			t.Errorf("bob's claim: %d %+v; want 403 naming group finance, with a hint", code, e)
		}
		if got := poolNames(t, p, "ops"); !strings.Contains(strings.Join(got, ","), "fin") {
			t.Errorf("the admin sees pools %v; want fin too", got)
		}
	})

	t.Run("BrowserHidesItAndKioskRefuses", func(t *testing.T) {
		b := MustLaunchBrowser(t)
		page := b.MustNewPage(t, 1024, 700)
		signIn(t, page, p, "bob", "/")
		expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
		must(t, expect.Locator(page.Locator(`[data-testid=pool][data-pool=demo]`)).ToBeVisible())
		must(t, expect.Locator(page.Locator(`[data-testid=pool][data-pool=fin]`)).ToHaveCount(0))
		screenshot(t, page, "home-bob")
		res, err := page.Goto(p.URL + "/kiosk/fin")
		must(t, err)
		if res.Status() != 403 {
			t.Errorf("bob's kiosk link: status %d; want 403", res.Status())
		}
		must(t, expect.Locator(page.GetByText("Pool fin is for group finance")).ToBeVisible())
		screenshot(t, page, "kiosk-refused")
	})

	var alices desktop
	t.Run("MembersClaim", func(t *testing.T) {
		if got := poolNames(t, p, "alice"); !strings.Contains(strings.Join(got, ","), "fin") {
			t.Errorf("alice sees pools %v; want fin", got)
		}
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/fin/claim", &alices); code != 200 || alices.Holder != "alice" {
			t.Fatalf("alice's claim: %d %+v", code, alices)
		}
	})

	t.Run("QuotaRefusesWithTheDesktopsHeld", func(t *testing.T) {
		var e apiError
		code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &e)
		if code != 409 || !strings.Contains(e.Error, "CORRAL_VDI_MAX_DESKTOPS_PER_USER") || !strings.Contains(e.Error, "local/"+alices.Name) {
			t.Errorf("alice's second desktop: %d %+v; want 409 naming the limit and local/%s", code, e, alices.Name)
		}
	})

	t.Run("WideningTakesEffectAtOnce", func(t *testing.T) {
		if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/fin", `{"access": {"groups": ["finance"], "users": ["bob"]}}`, nil); code != 200 {
			t.Fatalf("widen: %d", code)
		}
		var d desktop
		if code := p.API(t, "bob", "POST", "/api/vdi/pools/local/fin/claim", &d); code != 200 || d.Holder != "bob" {
			t.Errorf("bob's claim after widening: %d %+v", code, d)
		}
	})

	t.Run("GroupsFileChangesApply", func(t *testing.T) {
		must(t, os.WriteFile(groups, []byte("finance: [alice, carol]\n"), 0o600))
		if !eventually(10*time.Second, func() bool { return strings.Contains(strings.Join(poolNames(t, p, "carol"), ","), "fin") }) {
			t.Error("carol, added to finance in the groups file, does not see fin")
		}
		must(t, os.WriteFile(groups, []byte("finance: [alice, carol\n"), 0o600)) // broken: the last good file stays
		time.Sleep(3 * time.Second)
		if got := poolNames(t, p, "carol"); !strings.Contains(strings.Join(got, ","), "fin") {
			t.Errorf("after a broken groups file carol sees %v; want the last good groups kept", got)
		}
		if !strings.Contains(p.Log(), "groups file did not parse") {
			t.Error("the portal did not log the broken groups file")
		}
	})

	t.Run("NarrowingKeepsHeldDesktops", func(t *testing.T) {
		if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/fin", `{"access": {"users": ["bob"]}}`, nil); code != 200 {
			t.Fatalf("narrow: %d", code)
		}
		var d desktop
		if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+alices.Name, &d); code != 200 || d.Holder != "alice" {
			t.Errorf("alice's desktop after narrowing: %d %+v; want it still hers", code, d)
		}
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/fin/claim", nil); code != 403 {
			t.Errorf("alice's next claim after narrowing: %d; want 403", code)
		}
		b := MustLaunchBrowser(t)
		page := b.MustNewPage(t, 1280, 900)
		signIn(t, page, p, "ops", "/admin")
		expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
		row := page.Locator(`[data-testid=member][data-holder=alice]`)
		must(t, expect.Locator(row.GetByTestId("not-entitled")).ToBeVisible())
		must(t, expect.Locator(page.Locator(`[data-pool=fin] [data-testid=access-text]`)).ToHaveText("bob"))
		screenshot(t, page, "admin-access")
	})

	t.Run("AuditedChanges", func(t *testing.T) {
		var rows []struct {
			Action string `json:"action"`
			Detail string `json:"detail"`
		}
		if code := p.API(t, "ops", "GET", "/api/vdi/history/audit?limit=500", &rows); code != 200 {
			t.Fatalf("audit: %d", code)
		}
		n := 0
		for _, r := range rows {
			if r.Action == "pool-access" {
				n++
			}
		}
		if n != 2 {
			t.Errorf("%d pool-access audit rows; want 2 (widen, narrow): %+v", n, rows)
		}
	})
}
