package auth_test

import (
	"testing"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestIdentify_TrustedIdentity checks that the identity a listener puts in
// the context wins over headers and cookies, and that without it the same
// headers and cookies never yield it.
func TestIdentify_TrustedIdentity(t *testing.T) {
	a := mustNew(t, auth.Config{Modes: []string{auth.ModeTailscale, auth.ModeDev}, TrustedProxies: loopback, Admins: []string{"ops"}})
	cli := vdi.Identity{Login: "cli:root", Name: "root", Admin: true}
	cookie := signedInCookie(t, a, "mallory")

	r := request("127.0.0.1:1234", cookie, auth.HeaderTailscaleLogin, "ops")
	r = r.WithContext(auth.WithTrustedIdentity(r.Context(), cli))
	if id, ok := a.Identify(r); !ok || id.Login != cli.Login || !id.Admin {
		t.Fatalf("Identify with a trusted identity = %+v, %v; want %+v", id, ok, cli)
	}
	if id, ok := a.Identify(request("127.0.0.1:1234", cookie)); !ok || id.Login != "mallory" || id.Admin {
		t.Errorf("cookie without the context: %+v, %v; want mallory, not an admin", id, ok)
	}
	// A trusted proxy naming a cli: user is not believed.
	if id, ok := a.Identify(request("127.0.0.1:1234", nil, auth.HeaderTailscaleLogin, "cli:root")); ok {
		t.Errorf("Tailscale header cli:root = %+v; want nobody signed in", id)
	}
}
