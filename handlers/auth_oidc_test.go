package handlers

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/internal/testoidc"
	"github.com/corral-dev/corral-vdi-portal/static"
)

func TestSafeNext(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/desktops/local/demo-1?protocol=vnc", "/desktops/local/demo-1?protocol=vnc"},
		{"", "/"},
		{"https://evil.example/", "/"},
		{"//evil.example", "/"},
		{`/\evil.example`, "/"},
		{"/\t/evil.example", "/"},
		{"/\n/evil.example", "/"},
		{"/ /evil.example", "/"},
		{"/%09/evil.example", "/%09/evil.example"}, // stays encoded: a path on this site
	} {
		if got := safeNext(tc.in); got != tc.want {
			t.Errorf("safeNext(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}

// mustHandler returns the portal's real handler with a real Authenticator.
func mustHandler(tb testing.TB, loopback bool, acfg auth.Config) *Handler {
	tb.Helper()
	if acfg.KeyFile == "" && len(acfg.SessionKeys) == 0 {
		acfg.KeyFile = filepath.Join(tb.TempDir(), "cookie.keys")
	}
	a, err := auth.New(acfg)
	if err != nil {
		tb.Fatal(err)
	}
	assets, err := static.New()
	if err != nil {
		tb.Fatal(err)
	}
	return New(Config{Auth: a, Assets: assets, Loopback: loopback, PublicURLs: []string{"http://example.com"}})
}

func body(tb testing.TB, res *http.Response) string {
	tb.Helper()
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

func TestSignInPage(t *testing.T) {
	keys, _ := auth.ParseSessionKeys("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	oidc := auth.OIDCConfig{Issuer: "https://id.example.com", ClientID: "c", RedirectURL: "https://vdi.example.com/auth/oidc/callback", ProviderName: "Example <ID>"}
	for _, tc := range []struct {
		name             string
		loopback         bool
		modes            []string
		code             int
		button, nameForm bool
	}{
		{"dev on loopback", true, []string{"dev"}, 200, false, true},
		{"dev off loopback", false, []string{"dev", "tailscale"}, 403, false, false},
		{"oidc and dev on loopback", true, []string{"oidc", "dev"}, 200, true, true},
		{"oidc and dev off loopback", false, []string{"oidc", "dev"}, 200, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mustHandler(t, tc.loopback, auth.Config{Modes: tc.modes, SessionKeys: keys, OIDC: oidc})
			rec := httptest.NewRecorder()
			req := httptest.NewRequest("GET", `http://127.0.0.1:8080/signin?next=/desktops/local/x"><script>alert(1)</script>`, nil)
			req.RemoteAddr = "127.0.0.1:40000"
			h.ServeHTTP(rec, req)
			b := rec.Body.String()
			if rec.Code != tc.code {
				t.Fatalf("GET /signin: %d; want %d", rec.Code, tc.code)
			}
			if got := strings.Contains(b, `data-testid="signin-oidc"`); got != tc.button {
				t.Errorf("OIDC button shown = %v; want %v", got, tc.button)
			}
			if got := strings.Contains(b, `data-testid="login"`); got != tc.nameForm {
				t.Errorf("name form shown = %v; want %v", got, tc.nameForm)
			}
			if strings.Contains(b, "<script>alert") || strings.Contains(b, "Example <ID>") {
				t.Errorf("page does not escape next or the provider name:\n%s", b)
			}
			if tc.button && !strings.Contains(b, `href="/auth/oidc/login?next=%2Fdesktops%2Flocal%2Fx%22%3E%3Cscript%3Ealert%281%29%3C%2Fscript%3E"`) {
				t.Errorf("OIDC button does not carry next:\n%s", b)
			}
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "form-action 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
				t.Errorf("CSP %q; want form-action 'self' and frame-ancestors 'none'", csp)
			}
		})
	}
}

// TestOIDCRoutes signs in through the real handler and a real provider,
// then signs out: the form post leads to a page that moves on to the
// provider's end_session, and a cross-site sign-out is refused.
func TestOIDCRoutes(t *testing.T) {
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	defer srv.Close()
	user := testoidc.User{ID: "u1", Username: "dora", Password: "pw", Email: "dora@example.com", Name: "Dora"}
	op := testoidc.MustStart(t, testoidc.Config{ClientID: "c", ClientSecret: "s",
		RedirectURIs: []string{srv.URL + auth.CallbackPath}, PostLogoutRedirectURIs: []string{srv.URL + "/signin"}, Users: []testoidc.User{user}})
	keys, _ := auth.ParseSessionKeys("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	h = mustHandler(t, true, auth.Config{Modes: []string{"oidc"}, SessionKeys: keys,
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: "c", ClientSecret: "s", RedirectURL: srv.URL + auth.CallbackPath}})

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), srv.URL+"/desktops/") {
			return http.ErrUseLastResponse // the page itself needs the claim service
		}
		return nil
	}}
	res, err := client.Get(srv.URL + "/auth/oidc/login?next=" + url.QueryEscape("/desktops/local/demo-1"))
	if err != nil {
		t.Fatal(err)
	}
	body(t, res)
	id := res.Request.URL.Query().Get("authRequestID")
	res, err = client.PostForm(op.Issuer+"/login", url.Values{"id": {id}, "username": {"dora"}, "password": {"pw"}})
	if err != nil {
		t.Fatal(err)
	}
	body(t, res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/desktops/local/demo-1" {
		t.Fatalf("callback answered %d to %q; want 303 to the page asked for", res.StatusCode, res.Header.Get("Location"))
	}

	req, _ := http.NewRequest("POST", srv.URL+"/signout", nil)
	req.Header.Set("Origin", "https://evil.example")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if body(t, res); res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site sign-out: %d; want 403", res.StatusCode)
	}

	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err = client.Post(srv.URL+"/signout", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	b := body(t, res)
	if res.StatusCode != 200 || !strings.Contains(b, `http-equiv="refresh"`) || !strings.Contains(b, op.Issuer+"/end_session?") {
		t.Fatalf("sign-out: %d\n%s\nwant a page moving on to the provider's end_session", res.StatusCode, b)
	}
	var deleted bool
	for _, c := range res.Cookies() {
		deleted = deleted || (c.Name == "corral_vdi_session" && c.MaxAge < 0)
	}
	if !deleted {
		t.Error("sign-out did not delete the session cookie")
	}
}
