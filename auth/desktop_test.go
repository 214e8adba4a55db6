package auth_test

import (
	"net/http/httptest"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/auth"
)

// TestFromDesktop checks that a request marked as coming from inside a
// desktop gets neither the trusted-proxy rule nor a sign-in by name, while
// the same request unmarked gets both.
func TestFromDesktop(t *testing.T) {
	a := mustNew(t, auth.Config{Modes: []string{auth.ModeTailscale, auth.ModeDev}, TrustedProxies: loopback, Admins: []string{"admin"}})
	r := request("127.0.0.1:1234", nil, auth.HeaderTailscaleLogin, "admin")
	if id, ok := a.Identify(r); !ok || !id.Admin {
		t.Fatalf("unmarked loopback request = %+v, %v; want admin (the control)", id, ok)
	}
	r = r.WithContext(auth.WithFromDesktop(r.Context()))
	if id, ok := a.Identify(r); ok {
		t.Errorf("Tailscale header from a desktop = %+v; want nobody signed in", id)
	}
	w := httptest.NewRecorder()
	if err := a.SignIn(w, r, "admin"); err == nil || len(w.Result().Cookies()) > 0 {
		t.Errorf("sign-in by name from a desktop: %v, cookies %v; want refused, no cookie", err, w.Result().Cookies())
	}
	if err := a.SignIn(httptest.NewRecorder(), request("127.0.0.1:1234", nil), "admin"); err != nil {
		t.Errorf("sign-in by name from the portal's own user: %v (the control)", err)
	}
}
