package e2e

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// firstPixelWatch is an init script for every page of a bench: on the home
// page it notes when "Get a desktop" is clicked (in sessionStorage, which
// the tab keeps across the claim's redirect); on the console page it looks
// at the console's canvas every animation frame and notes when it first
// shows a drawn desktop (> 20 colours in a 160x100 sample), as
// window.__firstPixel. Both are epoch milliseconds (timeOrigin + now), so
// they compare across the navigation.
const firstPixelWatch = `(() => {
  const now = () => performance.timeOrigin + performance.now();
  document.addEventListener('click', (ev) => {
    if (ev.target.closest && ev.target.closest('[data-testid=get-desktop]')) sessionStorage.setItem('benchClickAt', String(now()));
  }, true);
  if (!location.pathname.startsWith('/desktops/')) return;
  window.__clickAt = Number(sessionStorage.getItem('benchClickAt')) || 0;
  sessionStorage.removeItem('benchClickAt');
  window.__marks = {};
  const mark = (k) => { if (!(k in window.__marks)) window.__marks[k] = now(); };
  const WS = window.WebSocket;
  window.WebSocket = function (...args) {
    mark('wsNew');
    const ws = new WS(...args);
    ws.addEventListener('open', () => mark('wsOpen'));
    ws.addEventListener('message', (ev) => {
      mark('wsFirstMessage');
      // The first big message after sign-in: the desktop's first frame arriving.
      if ('connected' in window.__marks && (ev.data.byteLength || ev.data.length || 0) >= 4096) mark('frameIn');
    });
    return ws;
  };
  window.WebSocket.prototype = WS.prototype;
  Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
  document.addEventListener('DOMContentLoaded', () => {
    const st = document.getElementById('status');
    if (st) new MutationObserver(() => { if (st.textContent === 'Connected') mark('connected'); }).observe(st, { childList: true, characterData: true, subtree: true });
  });
  const scratch = document.createElement('canvas');
  scratch.width = 160; scratch.height = 100;
  const g = scratch.getContext('2d', { willReadFrequently: true });
  g.imageSmoothingEnabled = false;
  function canvas() {
    const s = document.getElementById('screen');
    if (!s) return null;
    const ird = s.querySelector('iron-remote-desktop');
    if (ird) return ird.shadowRoot ? ird.shadowRoot.querySelector('canvas') : null;
    return s.querySelector('canvas');
  }
  function look() {
    const c = canvas();
    if (c && c.width > 1 && c.height > 1) {
      g.clearRect(0, 0, 160, 100);
      g.drawImage(c, 0, 0, 160, 100);
      const d = g.getImageData(0, 0, 160, 100).data;
      const seen = new Set();
      for (let i = 0; i < d.length; i += 4) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
      if (seen.size > 20) { window.__firstPixel = now(); return; }
    }
    requestAnimationFrame(look);
  }
  requestAnimationFrame(look);
})();`

// firstPixelParts reads, on the console page once it has drawn, where the
// time went, in ms since the click: the claim answered (claimed: the POST
// and its redirect), the console page's HTML in (html) and parsed (dom),
// /connect asked and answered (connectSent, connect), the wasm fetched, the
// page's own performance measures where each ended (page-run: the console
// page's script starts; connect-read: it has /connect's answer; ws-early:
// the VNC websocket opened as the page starts; vnc-open, vnc-import,
// rdp-import, rdp-wasm, rdp-load, rdp-connect), the console websocket created, open
// and first answered (wsNew, wsOpen, wsFirstMessage), signed in (connected:
// the status says so), the first frame's bytes in (frameIn: the first
// message of 4 KiB or more after that) and the first pixels (first).
const firstPixelParts = `() => {
  const o = performance.timeOrigin, click = window.__clickAt;
  const at = (ms) => Math.round(o + ms - click);
  const n = performance.getEntriesByType('navigation')[0];
  const res = performance.getEntriesByType('resource');
  const c = res.find((e) => /\/connect(\?|$)/.test(e.name));
  const w = res.find((e) => e.name.endsWith('.wasm'));
  const out = { origin: Math.round(o - click), claimed: at(n.redirectEnd || n.fetchStart), html: at(n.responseEnd), dom: at(n.domInteractive) };
  if (c) { out.connectSent = at(c.startTime); out.connect = at(c.responseEnd); out.connects = res.filter((e) => /\/connect(\?|$)/.test(e.name)).length; }
  if (w) { out.wasmSent = at(w.startTime); out.wasm = at(w.responseEnd); out.wasmBytes = w.transferSize; }
  const nv = res.filter((e) => e.name.includes('/static/novnc.'));
  if (nv.length) { out.novncFirst = at(Math.min(...nv.map((e) => e.startTime))); out.novncLast = at(Math.max(...nv.map((e) => e.responseEnd))); out.novncFiles = nv.length; }
  for (const m of performance.getEntriesByType('measure')) out[m.name] = at(m.startTime + m.duration);
  for (const [k, v] of Object.entries(window.__marks || {})) out[k] = Math.round(v - click);
  out.first = Math.round(window.__firstPixel - click);
  return JSON.stringify(out);
}`

// benchDesktops waits until pool has what a claim of kind needs: a free
// member powered on ("warm") or a free one stopped ("cold").
func benchDesktops(t *testing.T, p *Portal, pool, kind string) {
	t.Helper()
	waitFor(t, 60*time.Second, "a "+kind+" free member of "+pool, func() bool {
		var all []desktop
		p.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all)
		for _, d := range all {
			if d.Pool == pool && d.free() && (kind == "warm" && d.Power == "running" || kind == "cold" && d.Power == "stopped") {
				return true
			}
		}
		return false
	})
}

// TestBench_FirstPixel measures, for `make bench`, click "Get a desktop" →
// the desktop's first pixels in Chromium, for the VNC and the RDP console,
// from a cold pool (the member powers on after the claim) and a warm one
// (standby 1), a fresh claim of a new user each time, interleaved in the
// same run so the ratios compare like with like. Each measurement is a
// returning visit (a browser profile kept on disk, its caches warm from
// the rounds before); one more per console is a first visit (a fresh
// context, empty caches). Skipped unless CORRAL_VDI_BENCH=1;
// CORRAL_VDI_BENCH_ROUNDS sets the rounds (default 5);
// CORRAL_VDI_BENCH_TRACE=folder writes a Chromium trace of each claim
// there, click to first pixels (tracing slows the page: read its order
// and gaps, not its times). It reports; it asserts no times.
func TestBench_FirstPixel(t *testing.T) {
	if os.Getenv("CORRAL_VDI_BENCH") != "1" {
		t.Skip("a benchmark: set CORRAL_VDI_BENCH=1 (make bench)")
	}
	rounds, _ := strconv.Atoi(os.Getenv("CORRAL_VDI_BENCH_ROUNDS"))
	if rounds <= 0 {
		rounds = 5
	}
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	for _, body := range []string{
		`{"name": "cold", "size": 2, "mode": "ephemeral"}`,
		`{"name": "warm", "size": 2, "mode": "ephemeral", "standby": 1}`,
	} {
		if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", body, nil); code != 201 {
			t.Fatalf("create pool %s: %d", body, code)
		}
	}
	profile := MustLaunchProfile(t, 1280, 800)
	must(t, profile.AddInitScript(playwright.Script{Content: playwright.String(firstPixelWatch)}))
	fresh := MustLaunchBrowser(t)

	n := 0
	// measure claims from pool as a new user on a new page of ctx (a
	// fresh context when ctx is nil) and returns click → first pixel.
	measure := func(ctx playwright.BrowserContext, proto, pool string) (time.Duration, string) {
		t.Helper()
		benchDesktops(t, p, pool, pool)
		n++
		user := fmt.Sprintf("bench%d", n)
		var page playwright.Page
		if ctx == nil {
			page = fresh.MustNewPage(t, 1280, 800)
			must(t, page.Context().AddInitScript(playwright.Script{Content: playwright.String(firstPixelWatch)}))
		} else {
			var err error
			page, err = ctx.NewPage()
			must(t, err)
		}
		defer page.Close()
		if proto == "rdp" {
			// Every desktop here offers VNC first (its RDP server,
			// freerdp-shadow, has no clipboard); the RDP console is the
			// one a "Use RDP" link (?protocol=rdp) opens, so the claim's
			// redirect is sent there.
			must(t, page.Route("**/pools/local/*/claim", func(r playwright.Route) {
				res, err := r.Fetch(playwright.RouteFetchOptions{MaxRedirects: playwright.Int(0)})
				if err != nil {
					r.Abort()
					return
				}
				h := res.Headers()
				h["location"] += "?protocol=rdp"
				r.Fulfill(playwright.RouteFulfillOptions{Response: res, Headers: h})
			}))
		}
		signIn(t, page, p, user, "/")
		get := page.Locator(`[data-pool="` + pool + `"]`).GetByTestId("get-desktop")
		must(t, get.WaitFor())
		// A user reads the page before clicking: let what it fetches settle.
		page.WaitForLoadState(playwright.PageWaitForLoadStateOptions{State: playwright.LoadStateNetworkidle})
		trace := startBenchTrace(t, page.Context(), page)
		must(t, get.Click())
		var parts string
		waitFor(t, 60*time.Second, proto+" first pixels after "+pool+" claim", func() bool {
			v, err := page.Evaluate(`() => window.__firstPixel ? 1 : 0`)
			return err == nil && toInt(v) == 1
		})
		trace.stop(t, fmt.Sprintf("%s-%s-%d", proto, pool, n))
		v, err := page.Evaluate(firstPixelParts)
		must(t, err)
		parts = v.(string)
		var ms float64
		if i := strings.Index(parts, `"first":`); i >= 0 {
			ms, _ = strconv.ParseFloat(strings.TrimRight(parts[i+8:], "}"), 64)
		}
		if code := p.API(t, user, "POST", "/api/vdi/desktops/local/"+regexpMember(page.URL())+"/release", nil); code != 200 {
			t.Fatalf("release %s's desktop: %d", user, code)
		}
		return time.Duration(ms * float64(time.Millisecond)), parts
	}

	type key struct{ proto, pool string }
	got := map[key][]time.Duration{}
	details := map[key][]string{}
	// One returning visit of each before counting, so every counted one
	// finds the clients in the browser's caches.
	protos := []string{"vnc", "rdp"}
	if only := os.Getenv("CORRAL_VDI_BENCH_PROTOCOLS"); only != "" {
		protos = strings.Fields(only)
	}
	for _, proto := range protos {
		measure(profile, proto, "warm")
	}
	for r := 0; r < rounds; r++ {
		for _, proto := range protos {
			for _, pool := range []string{"cold", "warm"} {
				d, parts := measure(profile, proto, pool)
				k := key{proto, pool}
				got[k] = append(got[k], d)
				details[k] = append(details[k], parts)
			}
		}
	}
	firsts := map[string]time.Duration{}
	firstParts := map[string]string{}
	for _, proto := range protos {
		firsts[proto], firstParts[proto] = measure(nil, proto, "warm")
	}

	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	median := func(ds []time.Duration) time.Duration {
		s := slices.Clone(ds)
		slices.Sort(s)
		return s[len(s)/2]
	}
	for _, proto := range protos {
		for _, pool := range []string{"cold", "warm"} {
			ds := got[key{proto, pool}]
			fmt.Printf("BENCH %-48s median %6.0f ms  min %6.0f  max %6.0f  (%d claims)\n",
				"click → first pixel, "+strings.ToUpper(proto)+", "+pool+" pool", ms(median(ds)), ms(slices.Min(ds)), ms(slices.Max(ds)), len(ds))
		}
		cold, warm := median(got[key{proto, "cold"}]), median(got[key{proto, "warm"}])
		fmt.Printf("BENCH %-48s %6.2fx faster warm than cold (medians)\n", strings.ToUpper(proto)+" warm vs cold", ms(cold)/ms(warm))
		fmt.Printf("BENCH %-48s %6.0f ms  (fresh browser context, empty caches)\n",
			"click → first pixel, "+strings.ToUpper(proto)+", warm, first visit", ms(firsts[proto]))
	}
	for _, proto := range protos {
		for _, pool := range []string{"cold", "warm"} {
			for _, d := range details[key{proto, pool}] {
				fmt.Printf("BENCH   where the time went (ms after the click), %s %s: %s\n", proto, pool, d)
			}
		}
		fmt.Printf("BENCH   where the time went (ms after the click), %s warm first visit: %s\n", proto, firstParts[proto])
	}
}

// regexpMember returns the member a console page's URL names.
func regexpMember(u string) string {
	u, _, _ = strings.Cut(u, "?")
	return u[strings.LastIndexByte(u, '/')+1:]
}
