package e2e

import (
	"testing"
)

// TestAdmin_EndsAUsersSessions: an admin signs dan out everywhere from the
// dashboard's form in Chromium; dan's cookie stops working at once.
func TestAdmin_EndsAUsersSessions(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=1")
	dan := signInByName(t, p, "dan")
	if code := get(t, p.URL+"/api/vdi/desktops", dan); code != 200 {
		t.Fatalf("dan's cookie before: %d", code)
	}
	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "ops", "/admin")
	must(t, page.GetByTestId("end-sessions-login").Fill("dan"))
	must(t, page.GetByTestId("end-sessions-submit").Click())
	must(t, page.WaitForURL(p.URL+"/admin"))
	if code := get(t, p.URL+"/api/vdi/desktops", dan); code != 401 {
		t.Errorf("dan's cookie after an admin ended his sessions: %d; want 401", code)
	}
	if code := get(t, p.URL+"/api/vdi/desktops", signInByName(t, p, "dan")); code != 200 {
		t.Errorf("dan signing in again: %d; want 200", code)
	}
}
