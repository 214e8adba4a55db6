package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// usageSamples is GET /api/vdi/usage's answer, as far as the test reads it.
type usageSamples struct {
	Pools []struct {
		Namespace, Pool string
		Samples         []struct {
			Size, Claimed, Free, Refused int
		}
	}
}

// testUsageCharts is a step of TestAdmin_DashboardActions: with two of
// the demo pool's three desktops held, erin takes the last and frank is
// refused; the usage page then charts the full pool and the refusal, and
// says so in words. page is the admin's dashboard, left on it.
func testUsageCharts(t *testing.T, p *Portal, page playwright.Page) {
	erins := mustClaim(t, p, "erin", "demo")
	if code := p.API(t, "frank", "POST", "/api/vdi/pools/local/demo/claim", nil); code != 409 {
		t.Fatalf("frank's claim of the full pool: %d; want 409 (none free)", code)
	}
	sampled := eventually(60*time.Second, func() bool {
		var u usageSamples
		if code := p.API(t, "ops", "GET", "/api/vdi/usage?range=day", &u); code != 200 {
			return false
		}
		for _, pool := range u.Pools {
			for _, s := range pool.Samples {
				if pool.Pool == "demo" && s.Claimed == 3 && s.Free == 0 && s.Refused >= 1 {
					return true
				}
			}
		}
		return false
	})
	if !sampled {
		t.Fatal("GET /api/vdi/usage never showed demo full (3 of 3) with frank's refusal")
	}
	if code := p.API(t, "erin", "POST", "/api/vdi/desktops/local/"+erins.Name+"/release", nil); code != 200 {
		t.Fatalf("erin's release: %d", code)
	}

	expect := playwright.NewPlaywrightAssertions(20000)
	must(t, page.GetByTestId("usage-link").Click())
	demo := page.GetByTestId("usage-local-demo")
	must(t, expect.Locator(demo.GetByTestId("usage-day")).ToContainText("Peaked at 3 of 3 in use at"))
	must(t, expect.Locator(demo.GetByTestId("usage-day")).ToContainText("ran out of free desktops at"))
	must(t, expect.Locator(demo.GetByTestId("usage-week")).ToContainText("1 claim refused"))
	for _, chart := range []string{"chart-day", "chart-week"} {
		must(t, expect.Locator(demo.GetByTestId(chart).GetByTestId("refused")).ToHaveCount(1))
	}
	for _, size := range []struct {
		name          string
		width, height int
	}{{"laptop", 1280, 800}, {"tablet", 1024, 1366}, {"phone", 390, 844}} {
		must(t, page.SetViewportSize(size.width, size.height))
		must(t, expect.Locator(demo.GetByTestId("chart-day")).ToBeVisible())
		screenshot(t, page, "usage-"+size.name)
		if w, err := page.Evaluate(`() => document.documentElement.scrollWidth`, nil); err != nil || toInt(w) > size.width {
			t.Errorf("the usage page is %v pixels wide at %d (%v); want no sideways scroll", w, size.width, err)
		}
	}
	must(t, page.SetViewportSize(1280, 800))
	if code := p.API(t, "ops", "GET", "/api/vdi/usage?range=month", nil); code != 400 {
		t.Errorf("GET /api/vdi/usage?range=month: %d; want 400", code)
	}
	_, err := page.Goto(p.URL + "/admin")
	must(t, err)
	if !strings.HasSuffix(page.URL(), "/admin") {
		t.Fatalf("back on %s; want the dashboard", page.URL())
	}
	must(t, expect.Locator(page.GetByTestId("admin-link")).ToBeVisible())
}
