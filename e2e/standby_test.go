package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// warmMembers returns the free, running members of pool, asking as an admin.
func warmMembers(t *testing.T, p *Portal, pool string) []string {
	t.Helper()
	var all []desktop
	if code := p.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all); code != 200 {
		t.Fatalf("all desktops: %d", code)
	}
	var out []string
	for _, d := range all {
		if d.Pool == pool && d.free() && d.Power == "running" {
			out = append(out, d.Name)
		}
	}
	return out
}

// TestStandby_InstantAndFresh runs a pool with warm standby on real local
// desktops: a free member is kept running, a claim gets it without a boot
// (timed against a cold pool in the same run), the standby refills, the
// dashboard shows it, and a released ephemeral member comes back fresh
// before anyone gets it again.
func TestStandby_InstantAndFresh(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "warm", "size": 2, "mode": "ephemeral", "standby": 1}`, nil); code != 201 {
		t.Fatalf("create warm: %d", code)
	}
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "cold", "size": 1, "mode": "ephemeral"}`, nil); code != 201 {
		t.Fatalf("create cold: %d", code)
	}
	if !eventually(30*time.Second, func() bool { return len(warmMembers(t, p, "warm")) == 1 }) {
		t.Fatalf("no warm member 30s after creating a pool with standby 1:\n%s", p.Log())
	}

	claim := func(user, pool string) (desktop, time.Duration) {
		t.Helper()
		var d desktop
		start := time.Now()
		if code := p.API(t, user, "POST", "/api/vdi/pools/local/"+pool+"/claim", &d); code != 200 || d.Power != "running" {
			t.Fatalf("%s's claim from %s: %d %+v", user, pool, code, d)
		}
		return d, time.Since(start)
	}
	warm, warmTook := claim("alice", "warm")
	_, coldTook := claim("bob", "cold")
	t.Logf("claim to a running desktop: warm pool %v, cold pool %v (%.1fx)", warmTook.Round(time.Millisecond), coldTook.Round(time.Millisecond),
		float64(coldTook)/float64(warmTook))
	if !eventually(30*time.Second, func() bool { return len(warmMembers(t, p, "warm")) == 1 }) {
		t.Error("the standby did not refill after the claim")
	}

	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 900)
	signIn(t, page, p, "ops", "/admin")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	must(t, expect.Locator(page.Locator(`[data-pool=warm] [data-testid=standby]`)).ToHaveCount(1))
	must(t, expect.Locator(page.Locator(`[data-pool=warm] [data-testid=pool-standby]`)).ToHaveText("standby 1: 1 warm"))
	screenshot(t, page, "admin-standby")

	// alice leaves a file behind; after her release the member is recreated
	// (a fresh home) before the standby starts it for the next user.
	marker := filepath.Join(p.homeOf(warm.Name), "left-behind")
	must(t, os.WriteFile(marker, []byte("alice was here"), 0o644))
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+warm.Name+"/release", nil); code != 200 {
		t.Fatalf("release: %d", code)
	}
	next, _ := claim("carol", "warm")
	if _, err := os.Stat(filepath.Join(p.homeOf(next.Name), "left-behind")); err == nil {
		t.Errorf("carol got %s with alice's file in its home; want every standby member fresh", next.Name)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("%s kept alice's file after her release", warm.Name)
	}
}
