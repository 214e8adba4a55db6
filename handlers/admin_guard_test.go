package handlers

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAdminOnly_EveryAdminRoute checks that the one admin guard refuses a
// signed-in non-admin on every admin page and API route, before the
// handler reads anything, and lets an admin through. (A recording's file,
// GET /api/vdi/recordings/{id}, is not admin-only: its owner may have it
// where the pool allows; TestRecordings and the e2e attack rows check it.)
func TestAdminOnly_EveryAdminRoute(t *testing.T) {
	h := mustAdminHandler(t, 1, 2)
	send := func(user, method, path, body string) (int, string) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", user)
		if strings.HasPrefix(path, "/admin") {
			req.Header.Set("Accept", "text/html")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	routes := []struct{ method, path, body string }{
		{"GET", "/admin", ""},
		{"GET", "/admin/live", ""},
		{"GET", "/admin/thumbs/local/pool0-1", ""},
		{"GET", "/admin/shadow/local/pool0-1", ""},
		{"POST", "/admin/end-sessions", "login=user1"},
		{"GET", "/admin/history", ""},
		{"GET", "/admin/history/sessions.csv", ""},
		{"GET", "/admin/history/audit.csv", ""},
		{"GET", "/admin/usage", ""},
		{"GET", "/admin/recordings", ""},
		{"GET", "/admin/recordings/r1", ""},
		{"POST", "/admin/recordings/r1/delete", ""},
		{"POST", "/api/vdi/pools", `{"name":"p2","kind":"ct","size":1}`},
		{"PATCH", "/api/vdi/pools/local/pool0", `{"size":3}`},
		{"DELETE", "/api/vdi/pools/local/pool0", ""},
		{"GET", "/api/vdi/pools/local/pool0/job", ""},
		{"GET", "/api/vdi/jobs", ""},
		{"POST", "/api/vdi/pools/local/pool0/job/cancel", ""},
		{"POST", "/api/vdi/desktops/local/pool0-1/assign", `{"user":"user1"}`},
		{"POST", "/api/vdi/desktops/local/pool0-1/recreate", ""},
		{"POST", "/api/vdi/users/user1/end-sessions", ""},
		{"GET", "/api/vdi/history/sessions", ""},
		{"GET", "/api/vdi/history/audit", ""},
		{"GET", "/api/vdi/usage?range=week", ""},
		{"GET", "/api/vdi/recordings", ""},
		{"DELETE", "/api/vdi/recordings/r1", ""},
	}
	for _, rt := range routes {
		code, body := send("user0", rt.method, rt.path, rt.body)
		if code != http.StatusForbidden || !strings.Contains(body, "Only admins may see this page.") {
			t.Errorf("%s %s as a non-admin = %d %.200q; want 403 with the admin refusal", rt.method, rt.path, code, body)
		}
	}
	for _, path := range []string{"/admin", "/admin/history", "/api/vdi/history/audit", "/admin/usage", "/api/vdi/usage?range=week"} {
		if code, body := send("ops", "GET", path, ""); code != http.StatusOK {
			t.Errorf("GET %s as an admin = %d %.200q; want 200", path, code, body)
		}
	}
	for _, rg := range []string{"month", "-1", "day%00"} {
		code, body := send("ops", "GET", "/api/vdi/usage?range="+rg, "")
		if code != http.StatusBadRequest || !strings.Contains(body, "range=day") || !strings.Contains(body, `"hint"`) {
			t.Errorf("GET /api/vdi/usage?range=%s as an admin = %d %.200q; want 400 naming the ranges", rg, code, body)
		}
	}
}
