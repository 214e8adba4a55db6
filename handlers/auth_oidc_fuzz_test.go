package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/internal/testoidc"
)

// FuzzOIDCCallback sends fuzzed query strings and cookies to the OIDC
// callback with a real provider behind it: nothing makes a 5xx, and
// nothing without a sign-in the provider started signs anyone in.
func FuzzOIDCCallback(f *testing.F) {
	const redirect = "http://example.com" + auth.CallbackPath
	op := testoidc.MustStart(f, testoidc.Config{ClientID: "c", ClientSecret: "s", RedirectURIs: []string{redirect},
		Users: []testoidc.User{{ID: "u1", Username: "dora", Password: "pw", Email: "dora@example.com"}}})
	keys, _ := auth.ParseSessionKeys("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=")
	h := mustHandler(f, true, auth.Config{Modes: []string{"oidc"}, SessionKeys: keys,
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: "c", ClientSecret: "s", RedirectURL: redirect}})
	f.Add("code=abc&state=xyz", "")
	f.Add("error=access_denied&error_description=%3Cscript%3E", "")
	f.Add("state=", "corral_vdi_oidc=; corral_vdi_session=x")
	f.Add("code=a&code=b&state=%00&iss="+op.Issuer, "corral_vdi_oidc=MTIz")
	f.Add(strings.Repeat("a=b&", 500), "")
	f.Fuzz(func(t *testing.T, query, cookie string) {
		req := httptest.NewRequest("GET", "http://example.com/", nil)
		req.URL.RawQuery = query
		req.URL.Path = auth.CallbackPath
		req.RemoteAddr = "127.0.0.1:40000"
		if cookie != "" {
			req.Header.Set("Cookie", cookie)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("callback ?%q cookie %q = %d", query, cookie, rec.Code)
		}
		if rec.Code == 303 {
			t.Fatalf("callback ?%q cookie %q signed in (303 to %s)", query, cookie, rec.Header().Get("Location"))
		}
		for _, c := range rec.Result().Cookies() {
			if c.Name == "corral_vdi_session" && c.MaxAge >= 0 && c.Value != "" {
				t.Fatalf("callback ?%q cookie %q set a session cookie", query, cookie)
			}
		}
	})
}
