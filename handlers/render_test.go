package handlers

import (
	"net/http"
	"slices"
	"strings"
	"testing"
)

// TestSecurityHeaders_CSP pins the policy's script and fetch rules: IronRDP
// compiles its wasm under wasm-unsafe-eval alone (never unsafe-eval or
// unsafe-inline scripts), and fetches it from the portal, not from a data:
// URL.
func TestSecurityHeaders_CSP(t *testing.T) {
	h := http.Header{}
	securityHeaders(h)
	directives := map[string][]string{}
	for _, d := range strings.Split(h.Get("Content-Security-Policy"), ";") {
		if f := strings.Fields(d); len(f) > 0 {
			directives[f[0]] = f[1:]
		}
	}
	for name, want := range map[string][]string{
		"default-src": {"'self'"},
		"script-src":  {"'self'", "'wasm-unsafe-eval'"},
		"connect-src": {"'self'"},
		"object-src":  {"'none'"},
	} {
		if got := directives[name]; !slices.Equal(got, want) {
			t.Errorf("CSP %s = %q; want %q", name, got, want)
		}
	}
}
