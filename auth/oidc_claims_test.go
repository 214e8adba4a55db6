package auth

import "testing"

// TestOIDCUser_EmailVerified: only the boolean true vouches for an email
// login; absent, false or the string "true" do not.
func TestOIDCUser_EmailVerified(t *testing.T) {
	o := &oidcFlow{cfg: OIDCConfig{LoginClaim: "email", GroupsClaim: "groups"}}
	for _, tc := range []struct {
		verified any
		ok       bool
	}{{true, true}, {false, false}, {nil, false}, {"true", false}, {1, false}} {
		claims := map[string]any{"email": "eve@example.com"}
		if tc.verified != nil {
			claims["email_verified"] = tc.verified
		}
		_, _, _, err := o.user(claims)
		if (err == nil) != tc.ok {
			t.Errorf("email_verified %#v: err %v; want ok %v", tc.verified, err, tc.ok)
		}
	}
	o.cfg.LoginClaim = "preferred_username"
	if _, _, _, err := o.user(map[string]any{"preferred_username": "eve"}); err != nil {
		t.Errorf("login claim preferred_username needs no email_verified: %v", err)
	}
}
