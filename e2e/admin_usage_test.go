package e2e

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
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

	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
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

// testUsageStorm is a step of TestAdmin_DashboardActions after
// testUsageCharts: a morning's rush on two more pools, made for it (4 and
// 2 desktops): eleven people ask for a desktop of the first at once,
// four get one and seven are refused; one of them gives theirs back and a late
// one takes it; four ask for the second at once, two get one. Everyone then goes
// home (releases). The usage page must chart what happened: each pool's
// tallest in-use bar reaches the grid line of the desktops claimed at
// once (4 and 2, its size), a refusal mark is over the rush, and the
// words say the peak and the refusals counted. Screenshots at three
// sizes; the two pools are deleted after, leaving the dashboard as the
// later steps expect it.
func testUsageStorm(t *testing.T, p *Portal, page playwright.Page) {
	pools := []struct {
		name           string
		size, arrivals int
	}{{"rush-a", 4, 11}, {"rush-b", 2, 4}}
	held := map[string][]desktop{}
	refused := map[string]int{}
	start := time.Now()
	for _, pool := range pools {
		body := fmt.Sprintf(`{"name":%q,"kind":"ct","mode":"ephemeral","size":%d}`, pool.name, pool.size)
		var perr apiError
		if code := p.CreatePool(t, "ops", body, &perr); code != 201 {
			t.Fatalf("create pool %s: %d %+v", pool.name, code, perr)
		}
		t.Cleanup(func() { p.API(t, "ops", "DELETE", "/api/vdi/pools/local/"+pool.name, nil) })
		// Everyone at once.
		codes, got := make([]int, pool.arrivals), make([]desktop, pool.arrivals)
		errs := make([]error, pool.arrivals)
		var wg sync.WaitGroup
		for i := range pool.arrivals {
			wg.Go(func() {
				codes[i], errs[i] = p.call(fmt.Sprintf("%s-user%d", pool.name, i), "POST", "/api/vdi/pools/local/"+pool.name+"/claim", "", &got[i])
			})
		}
		wg.Wait()
		for i, code := range codes {
			switch {
			case errs[i] != nil:
				t.Fatal(errs[i])
			case code == 200:
				held[pool.name] = append(held[pool.name], got[i])
			case code == 409:
				refused[pool.name]++
			default:
				t.Fatalf("claim %d of %s: %d; want 200 or 409 (none free)", i, pool.name, code)
			}
		}
		if len(held[pool.name]) != pool.size || refused[pool.name] != pool.arrivals-pool.size {
			t.Fatalf("%d claims of %s (%d desktops): %d won, %d refused; want %d and %d", pool.arrivals, pool.name, pool.size,
				len(held[pool.name]), refused[pool.name], pool.size, pool.arrivals-pool.size)
		}
	}
	// waitSampled waits until the samples have seen each pool full and
	// every refusal made so far.
	waitSampled := func(when string) {
		t.Helper()
		sampled := eventually(60*time.Second, func() bool {
			var u usageSamples
			if code := p.API(t, "ops", "GET", "/api/vdi/usage?range=day", &u); code != 200 {
				return false
			}
			for _, pool := range pools {
				full, n := false, 0
				for _, got := range u.Pools {
					for _, s := range got.Samples {
						if got.Pool == pool.name {
							full = full || s.Claimed == pool.size
							n += s.Refused
						}
					}
				}
				if !full || n != refused[pool.name] {
					return false
				}
			}
			return true
		})
		if !sampled {
			t.Fatalf("%s, GET /api/vdi/usage never showed both rush pools full with every refusal (%v)", when, refused)
		}
	}
	t.Logf("the rush's claims answered in %v", time.Since(start).Round(time.Millisecond))
	waitSampled("before anyone left")
	t.Logf("sampled after %v", time.Since(start).Round(time.Millisecond))
	release := func(user string, d desktop) {
		if code := p.API(t, user, "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
			t.Fatalf("%s releases %s: %d", user, d.Name, code)
		}
	}
	// One of rush-a's leaves and a late one takes the desktop (once it
	// is made fresh); then everyone goes home.
	a := held["rush-a"]
	for i, d := range a[:1] {
		release(d.Holder, d)
		late := fmt.Sprintf("rush-a-late%d", i)
		var got desktop
		if !eventually(60*time.Second, func() bool {
			code := p.API(t, late, "POST", "/api/vdi/pools/local/rush-a/claim", &got)
			if code == 409 { // refused too while the desktop is made fresh
				refused["rush-a"]++
			}
			return code == 200
		}) {
			t.Fatalf("%s never got the desktop %s gave back", late, d.Holder)
		}
		a[i] = got
	}
	t.Logf("a late claim after %v", time.Since(start).Round(time.Millisecond))
	for _, pool := range pools {
		for _, d := range held[pool.name] {
			release(d.Holder, d)
		}
	}
	waitSampled("after everyone left")
	t.Logf("everyone left and sampled after %v", time.Since(start).Round(time.Millisecond))

	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	_, err := page.Goto(p.URL + "/admin/usage")
	must(t, err)
	for _, pool := range pools {
		card := page.GetByTestId("usage-local-" + pool.name)
		must(t, expect.Locator(card.GetByTestId("usage-day")).ToContainText(fmt.Sprintf("Peaked at %d of %d in use at", pool.size, pool.size)))
		must(t, expect.Locator(card.GetByTestId("usage-day")).ToContainText(fmt.Sprintf("%d claims refused", refused[pool.name])))
		// The picture: the tallest in-use bar's top is the grid line
		// labelled with the desktops claimed at once.
		chart := card.GetByTestId("chart-day")
		got, err := chart.Evaluate(`(fig, n) => {
			const tops = [...fig.querySelectorAll('rect.in-use')].map(r => +r.getAttribute('y'));
			const tick = [...fig.querySelectorAll('text.y')].find(t => t.textContent === String(n));
			return tick ? Math.min(...tops) - (+tick.getAttribute('y') - 4) : 'no grid line ' + n;
		}`, pool.size)
		must(t, err)
		if d, ok := got.(float64); !ok && toInt(got) != 0 || ok && math.Abs(d) > 0.05 {
			t.Errorf("%s's day chart: its tallest in-use bar is %v SVG units off the grid line %d; want on it", pool.name, got, pool.size)
		}
		must(t, expect.Locator(chart.GetByTestId("refused")).Not().ToHaveCount(0))
	}
	for _, size := range []struct {
		name          string
		width, height int
	}{{"laptop", 1280, 800}, {"tablet", 1024, 1366}, {"phone", 390, 844}} {
		must(t, page.SetViewportSize(size.width, size.height))
		must(t, page.GetByTestId("usage-local-rush-a").ScrollIntoViewIfNeeded())
		screenshot(t, page, "usage-rush-"+size.name)
	}
	must(t, page.SetViewportSize(1280, 800))
	for _, pool := range pools {
		if code := p.API(t, "ops", "DELETE", "/api/vdi/pools/local/"+pool.name, nil); code != 200 && code != 204 {
			t.Errorf("delete pool %s: %d", pool.name, code)
		}
	}
	_, err = page.Goto(p.URL + "/admin")
	must(t, err)
}
