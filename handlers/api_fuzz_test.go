package handlers

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// apiFuzzRoutes are the JSON API routes whose bodies FuzzAPIBodies sends,
// on mustAdminHandler's pools. None of them starts a desktop (bodies that
// set a warm standby are skipped: that would).
var apiFuzzRoutes = []struct{ method, path string }{
	{"POST", "/api/vdi/pools"},
	{"PATCH", "/api/vdi/pools/local/pool0"},
	{"POST", "/api/vdi/desktops/local/pool0-3/release"},
}

// FuzzAPIBodies sends fuzzed JSON bodies to the admin API as an admin: no
// body makes a 5xx, and every refusal is the JSON error shape with a hint.
func FuzzAPIBodies(f *testing.F) {
	for _, s := range []string{
		`{"name":"lab","size":2,"policy":{"idleTimeout":"1h"}}`,
		`{"name":"Lab!","size":1}`, `{"size":3}`, `{"size":-1}`, `{"size":1e300}`,
		`{"policy":{"maxSession":"soon","clipboard":"sideways"}}`, `{"access":{"users":["a"],"groups":[""]}}`,
		`{"limits":{"desktopsPerUser":-5}}`, `{"reason":"` + strings.Repeat("x", 5000) + `"}`,
		`{"name":`, `[]`, `null`, "\x00", `{"name":"a","kind":"vm","source":"../../etc"}`,
	} {
		for i := range apiFuzzRoutes {
			f.Add(uint8(i), s)
		}
	}
	h := mustAdminHandler(f, 1, 6)
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		if setsStandby(body) {
			t.Skip("a warm standby starts real desktops")
		}
		rt := apiFuzzRoutes[int(route)%len(apiFuzzRoutes)]
		req := httptest.NewRequest(rt.method, rt.path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", "ops")
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q = %d %s", rt.method, rt.path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e api.Error
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Msg == "" || e.Hint == "" {
				t.Fatalf("%s %s %q = %d %q: want a JSON error with a hint", rt.method, rt.path, body, rec.Code, rec.Body)
			}
		}
	})
}

// setsStandby reports whether body, as the API decodes it (keys match
// case-insensitively), asks for warm standby members.
func setsStandby(body string) bool {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return strings.Contains(strings.ToLower(body), "standby") // keep to the safe side
	}
	for k := range m {
		if strings.EqualFold(k, "standby") {
			return true
		}
	}
	return false
}
