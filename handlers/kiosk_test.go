package handlers

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// TestKiosk_OnlyTheVisitorsNavigationsClaim: another site embedding or
// linking the kiosk URL must not claim a desktop for the visitor; it gets
// a button that claims with a same-origin POST.
func TestKiosk_OnlyTheVisitorsNavigationsClaim(t *testing.T) {
	for _, tc := range []struct {
		name, site, dest string
		claims           bool
	}{
		{"typed", "none", "document", true},
		{"same-origin", "same-origin", "document", true},
		{"cross-site link", "cross-site", "document", false},
		{"same-site link", "same-site", "document", false},
		{"iframe", "cross-site", "iframe", false},
		{"image", "cross-site", "image", false},
		{"no fetch metadata", "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := mustAdminHandler(t, 1, 2)
			req := httptest.NewRequest("GET", "/kiosk/pool0", nil)
			req.RemoteAddr = "127.0.0.1:40000"
			req.Header.Set("Tailscale-User-Login", "kiosk")
			if tc.site != "" {
				req.Header.Set("Sec-Fetch-Site", tc.site)
				req.Header.Set("Sec-Fetch-Dest", tc.dest)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			body := rec.Body.String()
			claimed := strings.Contains(body, `data-testid="screen"`)
			if claimed != tc.claims || rec.Code != 200 {
				t.Errorf("GET /kiosk/pool0 (Sec-Fetch-Site %q, Dest %q) = %d, claimed %v; want 200, claimed %v", tc.site, tc.dest, rec.Code, claimed, tc.claims)
			}
			if !tc.claims && !strings.Contains(body, `data-testid="kiosk-continue"`) {
				t.Errorf("refused kiosk page has no continue button:\n%s", body)
			}
		})
	}
}
