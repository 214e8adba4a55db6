package e2e

import (
	"strings"
	"sync"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// TestBrowser_DNSRebindingGetsNothing opens the portal in a real Chromium
// under a foreign name that resolves to 127.0.0.1, as a rebinding page
// would be: every response it gets is the 421 page (or JSON), its script
// cannot sign in by name or use the Tailscale header that loopback would
// otherwise be trusted with, and no cookie is set.
func TestBrowser_DNSRebindingGetsNothing(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowserWith(t, "--host-resolver-rules=MAP "+rebindTo+" 127.0.0.1")
	page := b.MustNewPage(t, 1024, 700)
	var mu sync.Mutex
	statuses := map[string]int{}
	page.OnResponse(func(r playwright.Response) {
		mu.Lock()
		defer mu.Unlock()
		statuses[r.URL()] = r.Status()
	})
	origin := "http://" + rebindTo + portOf(strings.TrimPrefix(p.URL, "http://"))
	res, err := page.Goto(origin + "/")
	must(t, err)
	if res.Status() != 421 {
		t.Fatalf("GET %s/ = %d; want 421", origin, res.Status())
	}
	text, err := page.GetByTestId("error").TextContent()
	must(t, err)
	if !strings.Contains(text, "does not answer to the name "+rebindTo) {
		t.Errorf("421 page says %q", text)
	}
	hint, _ := page.GetByTestId("hint").TextContent()
	if !strings.Contains(hint, "CORRAL_VDI_PUBLIC_URL") {
		t.Errorf("421 page hint %q does not name CORRAL_VDI_PUBLIC_URL", hint)
	}
	screenshot(t, page, "rebind-421")

	// What the rebinding page's script would try next.
	got, err := page.Evaluate(`async () => {
		const out = {};
		const signin = await fetch('/signin', {method: 'POST', redirect: 'manual',
			headers: {'Content-Type': 'application/x-www-form-urlencoded'}, body: 'login=ops&next=/'});
		out.signin = signin.status;
		const api = await fetch('/api/vdi/desktops?all=1', {headers: {'Tailscale-User-Login': 'ops'}});
		out.api = api.status;
		const claim = await fetch('/api/vdi/pools/local/demo/claim', {method: 'POST', headers: {'Tailscale-User-Login': 'ops'}});
		out.claim = claim.status;
		out.ws = await new Promise((resolve) => {
			const ws = new WebSocket('ws://' + location.host + '/ws/terminal/local/demo-1');
			ws.onopen = () => { ws.close(); resolve('open'); };
			ws.onerror = () => resolve('refused');
		});
		return out;
	}`)
	must(t, err)
	m := got.(map[string]any)
	for _, k := range []string{"signin", "api", "claim"} {
		if n, _ := m[k].(int); n != 421 {
			t.Errorf("the page's %s fetch = %v; want 421", k, m[k])
		}
	}
	if m["ws"] != "refused" {
		t.Errorf("the page's terminal websocket: %v; want refused", m["ws"])
	}
	cookies, err := page.Context().Cookies()
	must(t, err)
	if len(cookies) != 0 {
		t.Errorf("the rebinding page got cookies %v; want none", cookies)
	}
	mu.Lock()
	for u, code := range statuses {
		if code != 421 {
			t.Errorf("the rebinding page got %d for %s; want only 421s", code, u)
		}
	}
	mu.Unlock()
	var all []desktop
	p.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all)
	for _, d := range all {
		if !d.free() {
			t.Errorf("desktop %s claimed by %s after the rebinding page", d.Name, d.Holder)
		}
	}
}
