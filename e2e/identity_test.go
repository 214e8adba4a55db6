package e2e

import (
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// newPortalCmd returns `serve` with its own data directory and env.
func newPortalCmd(tb testing.TB, env ...string) *exec.Cmd {
	tb.Helper()
	data, err := os.MkdirTemp("", "cvd")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { removeData(data) })
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "CORRAL_VDI_LISTEN=127.0.0.1:0", "CORRAL_VDI_DATA_DIR="+data, "CORRAL_VDI_DEMO_POOL_SIZE=0")
	cmd.Env = append(cmd.Env, env...)
	return cmd
}

// get sends a GET with the given cookie and headers and returns the status.
func get(tb testing.TB, u string, cookie *http.Cookie, header ...string) int {
	tb.Helper()
	req, err := http.NewRequest("GET", u, nil)
	if err != nil {
		tb.Fatal(err)
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// signInByName posts the sign-in-by-name form and returns the session cookie.
func signInByName(tb testing.TB, p *Portal, login string) *http.Cookie {
	tb.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.PostForm(p.URL+"/signin", url.Values{"login": {login}, "next": {"/"}})
	if err != nil {
		tb.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "corral_vdi_session" {
			return c
		}
	}
	tb.Fatalf("sign-in by name: %d and no session cookie", res.StatusCode)
	return nil
}

// TestIdentity_SpoofedTailscaleHeader runs the portal trusting a proxy
// range without 127.0.0.1: the same header from here is ignored, and the
// portal logs it once per address.
func TestIdentity_SpoofedTailscaleHeader(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_AUTH=tailscale", "CORRAL_VDI_TRUSTED_PROXIES=198.51.100.0/24,2001:db8::/32", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	var e apiError
	for i := 0; i < 3; i++ {
		if code := p.API(t, "admin@example.com", "GET", "/api/vdi/pools", &e); code != 401 {
			t.Fatalf("Tailscale header from 127.0.0.1 with proxies 198.51.100.0/24: %d; want 401", code)
		}
	}
	// The home page sends the stranger to /signin, which has no way in to offer.
	if code := get(t, p.URL+"/", nil, "Tailscale-User-Login", "admin@example.com"); code != 403 {
		t.Errorf("home page with a spoofed header: %d; want the sign-in refusal (403)", code)
	}
	if n := strings.Count(p.Log(), "ignored Tailscale identity header"); n != 1 {
		t.Errorf("portal logged the spoofed header %d times; want once:\n%s", n, p.Log())
	}
}

// TestIdentity_ForgedCookie sends session cookies this portal did not sign.
func TestIdentity_ForgedCookie(t *testing.T) {
	one, two := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0"), MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0")
	own := signInByName(t, one, "alice")
	if code := get(t, one.URL+"/api/vdi/pools", own); code != 200 {
		t.Fatalf("own cookie: %d; want 200", code)
	}
	foreign := *own // signed with the other portal's key
	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
	}{
		{"signed by another portal", &foreign},
		{"unsigned", &http.Cookie{Name: "corral_vdi_session", Value: "bG9naW49YWRtaW4="}},
		{"truncated", &http.Cookie{Name: "corral_vdi_session", Value: own.Value[:len(own.Value)/2]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code := get(t, two.URL+"/api/vdi/pools", tc.cookie); code != 401 {
				t.Errorf("cookie %s: %d; want 401", tc.name, code)
			}
		})
	}
}

// TestIdentity_SignInByNameOffLoopback listens on every address: the
// sign-in-by-name page and form are refused.
func TestIdentity_SignInByNameOffLoopback(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_LISTEN=0.0.0.0:0", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	if code := get(t, p.URL+"/signin", nil); code != 403 {
		t.Errorf("GET /signin off loopback: %d; want 403", code)
	}
	res, err := http.PostForm(p.URL+"/signin", url.Values{"login": {"alice"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 403 || len(res.Cookies()) != 0 {
		t.Errorf("POST /signin off loopback: %d, cookies %v; want 403 and none", res.StatusCode, res.Cookies())
	}
}

// cspWatch collects Content-Security-Policy violations seen by the page:
// securitypolicyviolation events (recorded by an init script, which runs
// outside the page's CSP) and console errors about the policy.
const cspWatch = `window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push(e.violatedDirective + ' blocked ' + (e.blockedURI || 'inline') + ' at ' + e.sourceFile + ':' + e.lineNumber);
});`

func cspViolations(t *testing.T, page playwright.Page, console *[]string, mu *sync.Mutex) []string {
	t.Helper()
	v, err := page.Evaluate(`() => window.__csp || []`)
	must(t, err)
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	mu.Lock()
	out = append(out, *console...)
	*console = nil
	mu.Unlock()
	return out
}

// TestCSP_EveryConsoleWorks opens each console the desktop offers under
// the portal's real Content-Security-Policy; any violation fails the test.
// It first shows that a violation would be caught.
func TestCSP_EveryConsoleWorks(t *testing.T) {
	portal := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000)) // IronRDP compiles its wasm first: slow on a busy machine
	page.OnDialog(func(d playwright.Dialog) { d.Accept() })
	must(t, page.AddInitScript(playwright.Script{Content: playwright.String(cspWatch)}))
	var mu sync.Mutex
	var console []string
	page.OnConsole(func(m playwright.ConsoleMessage) {
		if os.Getenv("E2E_DEBUG") != "" {
			t.Logf("console %s: %s", m.Type(), m.Text())
		}
		if m.Type() == "error" && strings.Contains(m.Text(), "Content Security Policy") {
			mu.Lock()
			console = append(console, m.Text())
			mu.Unlock()
		}
	})

	_, err := page.Goto(portal.URL + "/")
	must(t, err)
	must(t, page.GetByTestId("login").Fill("csp-tester"))
	must(t, page.GetByTestId("signin").Click())
	must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText("csp-tester"))

	t.Run("a violation is caught", func(t *testing.T) {
		_, err := page.Evaluate(`() => { const s = document.createElement('script'); s.textContent = 'window.__inline = 1'; document.body.append(s); }`)
		must(t, err)
		time.Sleep(200 * time.Millisecond)
		if got := cspViolations(t, page, &console, &mu); len(got) == 0 {
			t.Fatal("an inline script ran without a CSP violation being seen; the watch is blind")
		}
		if v, _ := page.Evaluate(`() => window.__inline === 1`); v == true {
			t.Error("inline script ran: the CSP does not block inline scripts")
		}
	})

	must(t, page.Locator(`[data-pool="demo"]`).GetByTestId("get-desktop").Click())
	must(t, page.WaitForURL(regexp.MustCompile(`/desktops/local/demo-\d$`)))
	consoleURL := page.URL()
	member := regexp.MustCompile(`demo-\d$`).FindString(consoleURL)
	var info struct {
		Protocol  string `json:"protocol"`
		Fallbacks []struct {
			Protocol string `json:"protocol"`
		} `json:"fallbacks"`
	}
	if code := portal.API(t, "csp-tester", "GET", "/api/vdi/desktops/local/"+member+"/connect", &info); code != 200 {
		t.Fatalf("connect info: %d", code)
	}
	protocols := []string{info.Protocol}
	for _, f := range info.Fallbacks {
		protocols = append(protocols, f.Protocol)
	}
	t.Logf("consoles offered: %v", protocols)
	for _, proto := range protocols {
		t.Run(proto, func(t *testing.T) {
			_, err := page.Goto(consoleURL + "?protocol=" + proto)
			must(t, err)
			err = expect.Locator(page.GetByTestId("status")).ToHaveText("Connected")
			time.Sleep(500 * time.Millisecond) // late-loading modules (wasm) get their chance to violate
			screenshot(t, page, "console-"+proto)
			if got := cspViolations(t, page, &console, &mu); len(got) > 0 {
				t.Errorf("CSP violations on the %s console: %q", proto, got)
			}
			if err != nil {
				t.Errorf("%s console did not connect (no CSP violation seen): %v", proto, err)
			}
		})
	}
}

// routePattern finds every route registered in handlers/routes.go.
var routePattern = regexp.MustCompile(`m\.Handle(?:Func)?\("([^"]+)"`)

// Routes anyone may use, and routes every signed-in user may use; every
// other route must refuse a signed-in user who is neither the desktop's
// holder nor an admin. A new route is in the last group until added here.
var (
	publicRoutes = map[string]bool{
		"GET /static/": true, "GET /healthz": true, "GET /readyz": true, "GET /metrics": true,
		"GET /signin": true, "POST /signin": true, "POST /signout": true,
		"GET /auth/oidc/login": true, "GET /auth/oidc/callback": true, "/api/": true,
		"GET /favicon.ico": true, "/": true, // the icon; the HTML 404 of every unknown route
	}
	userRoutes = map[string]bool{
		"GET /{$}": true, "GET /api/vdi/pools": true, "GET /api/vdi/desktops": true,
		"POST /api/vdi/pools/{ns}/{pool}/claim": true, "POST /pools/{ns}/{pool}/claim": true, "GET /kiosk/{pool}": true, "POST /kiosk/{pool}": true,
		"GET /history": true, // the user's own sessions
		// The user's own tokens (another's id is not found).
		"GET /tokens": true, "POST /tokens": true, "POST /tokens/{id}/revoke": true,
		"GET /api/vdi/tokens": true, "POST /api/vdi/tokens": true, "DELETE /api/vdi/tokens/{id}": true,
		"PUT /api/vdi/settings/size":     true, // the user's own choice (TestAttacks: cross-site, bad values)
		"PUT /api/vdi/settings/keyboard": true, // the same
		"/mcp":                           true, // a token's only: a signed-in browser gets 401 too (TestAttack_MCP)
		"POST /api/vdi/desktops/{ns}/{member}/agent/{tool}": true, // as /mcp; another's desktop is 403 (TestAttack_MCP/AgentAPI)
	}
)

// TestAuthz_EveryRoute walks the route list: a signed-in user who holds
// nothing and is no admin gets 403 from every admin route and every route
// of another's desktop (websockets included), and nobody signed out gets in.
func TestAuthz_EveryRoute(t *testing.T) {
	src, err := os.ReadFile("../handlers/routes.go")
	must(t, err)
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=1")
	a := mustClaim(t, p, "alice", "demo")
	fill := strings.NewReplacer("{ns}", "local", "{member}", a.Name, "{pool}", "demo", "{protocol}", "vnc", "{$}", "")
	wildcard := regexp.MustCompile(`\{[a-z]+(\.\.\.)?\}`)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	do := func(method, path, user string) int {
		req, err := http.NewRequest(method, p.URL+path, nil)
		must(t, err)
		if user != "" {
			req.Header.Set("Tailscale-User-Login", user)
		}
		res, err := noRedirect.Do(req)
		must(t, err)
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	checked := 0
	for _, m := range routePattern.FindAllSubmatch(src, -1) {
		route := string(m[1])
		if publicRoutes[route] {
			continue
		}
		method, path, ok := strings.Cut(route, " ")
		if !ok {
			method, path = "GET", route
		}
		path = wildcard.ReplaceAllString(fill.Replace(path), "x")
		t.Run(route, func(t *testing.T) {
			if code := do(method, path, ""); code != 401 && code != 303 {
				t.Errorf("%s %s signed out: %d; want 401 (API) or 303 to sign-in (page)", method, path, code)
			}
			if userRoutes[route] {
				return
			}
			checked++
			if code := do(method, path, "mallory"); code != 403 {
				t.Errorf("%s %s as a user who holds nothing and is no admin: %d; want 403", method, path, code)
			}
		})
	}
	if checked < 8 {
		t.Errorf("checked %d routes for 403; the route list in handlers/routes.go was not read right", checked)
	}
	var d desktop
	if code := p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.Name, &d); code != 200 || d.Holder != "alice" || d.Power != "running" {
		t.Errorf("alice's desktop after the walk: %d %+v; want still hers and running", code, d)
	}
}
