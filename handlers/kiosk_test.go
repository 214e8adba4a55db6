package handlers

import (
	"net/http/httptest"
	"testing"
)

// TestKiosk_OnlyNavigationsClaim: another site embedding the kiosk link
// as an image or fetch must not claim a desktop for the visitor.
func TestKiosk_OnlyNavigationsClaim(t *testing.T) {
	h := mustAdminHandler(t, 1, 2)
	for _, tc := range []struct {
		mode    string
		refused bool
	}{{"no-cors", true}, {"cors", true}, {"navigate", false}, {"", false}} {
		req := httptest.NewRequest("GET", "/kiosk/pool0", nil)
		req.RemoteAddr = "127.0.0.1:40000"
		req.Header.Set("Tailscale-User-Login", "kiosk")
		if tc.mode != "" {
			req.Header.Set("Sec-Fetch-Mode", tc.mode)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if refused := rec.Code == 403; refused != tc.refused {
			t.Errorf("GET /kiosk/pool0 with Sec-Fetch-Mode %q = %d; want refused %v", tc.mode, rec.Code, tc.refused)
		}
	}
}
