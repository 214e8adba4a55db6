package handlers

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// TestHistoryJSON checks the JSON history routes' filters, limit and
// admin check (the admin CLI's history and audit read them).
func TestHistoryJSON(t *testing.T) {
	h := mustAdminHandler(t, 1, 4) // sessions of user0 on pool0-1 and user3 on pool0-4
	send := func(user, method, path, body string) (int, []byte) {
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", user)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, rec.Body.Bytes()
	}
	hourAgo := url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339))
	inAnHour := url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))
	for _, tc := range []struct {
		query    string
		want     int
		desktops string
	}{
		{"", http.StatusOK, "pool0-4 pool0-1"},
		{"?user=user3", http.StatusOK, "pool0-4"},
		{"?pool=local/pool0&since=" + hourAgo, http.StatusOK, "pool0-4 pool0-1"},
		{"?since=" + inAnHour, http.StatusOK, ""},
		{"?since=2006-01-02T15:04", http.StatusOK, "pool0-4 pool0-1"},
		{"?limit=1", http.StatusOK, "pool0-4"},
		{"?limit=0", http.StatusBadRequest, ""},
		{"?since=yesterday", http.StatusBadRequest, ""},
	} {
		code, body := send("ops", "GET", "/api/vdi/history/sessions"+tc.query, "")
		if code != tc.want {
			t.Errorf("sessions%s = %d %s; want %d", tc.query, code, body, tc.want)
			continue
		}
		if code != http.StatusOK {
			var e api.Error
			if json.Unmarshal(body, &e) != nil || e.Hint == "" {
				t.Errorf("sessions%s: error %s has no hint", tc.query, body)
			}
			continue
		}
		var got []api.Session
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatalf("sessions%s: %v in %s", tc.query, err, body)
		}
		var names []string
		for _, s := range got {
			names = append(names, s.Desktop)
		}
		if strings.Join(names, " ") != tc.desktops {
			t.Errorf("sessions%s = %q; want %q", tc.query, names, tc.desktops)
		}
	}
	if code, body := send("ops", "PATCH", "/api/vdi/pools/local/pool0", `{"size": 5}`); code != http.StatusOK {
		t.Fatalf("resize: %d %s", code, body)
	}
	code, body := send("ops", "GET", "/api/vdi/history/audit?user=ops", "")
	var audit []api.AuditEntry
	if code != http.StatusOK || json.Unmarshal(body, &audit) != nil {
		t.Fatalf("audit: %d %s", code, body)
	}
	if len(audit) != 1 || audit[0].Actor != "ops" || audit[0].Action != "pool-resize" || audit[0].Target != "pool0" {
		t.Fatalf("audit of ops = %+v; want one pool-resize of pool0", audit)
	}
	for _, path := range []string{"/api/vdi/history/sessions", "/api/vdi/history/audit"} {
		if code, body := send("user0", "GET", path, ""); code != http.StatusForbidden {
			t.Errorf("%s as a non-admin: %d %s; want 403", path, code, body)
		}
	}
}
