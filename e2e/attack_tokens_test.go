package e2e

import (
	"context"
	"database/sql"
	"net/http"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite" // reads the portal's database to age a token
)

// tokenAttacks are the attack table's rows on personal access tokens
// (issue #62): a token acts as its user on the pools it names only,
// until it expires or is revoked; it is read from the Authorization
// header alone, and neither it nor a cookie makes tokens from another
// site.
func tokenAttacks() []attack {
	// tokenFor makes a token of user's (once) and keeps it in the
	// arena's state under key; each row's setup asks for what it uses,
	// so that any row runs alone.
	tokenFor := func(t *testing.T, a *arena, key, user, body string) {
		if a.state[key] == nil {
			a.state[key] = mustToken(t, a.p, user, body)
		}
	}
	otherPool := func(t *testing.T, a *arena) {
		if a.state["pool other"] == nil {
			if code := a.p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name": "other", "size": 1}`, nil); code != 201 {
				t.Fatalf("create pool other: %d", code)
			}
			a.state["pool other"] = true
		}
		tokenFor(t, a, "other", "alice", `{"name": "other-only", "pools": ["local/other"]}`)
	}
	demoToken := func(t *testing.T, a *arena) {
		tokenFor(t, a, "demo", "alice", `{"name": "demo-agent", "pools": ["local/demo"]}`)
	}
	aliceCookie := func(t *testing.T, a *arena) {
		if a.state["alice cookie"] == nil {
			a.state["alice cookie"] = a.signIn(t, "alice")
		}
	}
	release := func(a *arena) string { return "/api/vdi/desktops/local/" + a.victim + "/release" }
	return []attack{
		{
			// alice's token for pool other releases her desktop of pool
			// demo: a token reaches the pools it names only.
			name:  "TokenForPoolAUsedOnPoolB",
			setup: otherPool,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", release(a), "", "Authorization", "Bearer "+a.state["other"].(token).Token)
			},
			status: 403, says: "does not reach pool local/demo",
		},
		{
			// The same token claims from pool demo (where alice holds a
			// desktop, which a claim would hand back).
			name:  "TokenForPoolAClaimsFromPoolB",
			setup: otherPool,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/pools/local/demo/claim", "", "Authorization", "Bearer "+a.state["other"].(token).Token)
			},
			status: 403, says: "does not reach pool local/demo",
		},
		{
			name: "ExpiredToken",
			setup: func(t *testing.T, a *arena) {
				tok := mustToken(t, a.p, "alice", `{"name": "aged", "pools": ["local/demo"], "expires": "1h"}`)
				a.state["aged"] = tok
				db, err := sql.Open("sqlite", "file:"+filepath.Join(a.p.DataDir, "portal.db")+"?_pragma=busy_timeout(10000)")
				if err != nil {
					t.Fatal(err)
				}
				defer db.Close()
				if _, err := db.ExecContext(context.Background(), `UPDATE tokens SET expires_at = 1 WHERE id = ?`, tok.ID); err != nil {
					t.Fatal(err)
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", release(a), "", "Authorization", "Bearer "+a.state["aged"].(token).Token)
			},
			status: 401, says: "not signed in",
		},
		{
			name: "RevokedToken",
			setup: func(t *testing.T, a *arena) {
				tok := mustToken(t, a.p, "alice", `{"name": "gone", "pools": ["local/demo"]}`)
				a.state["gone"] = tok
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/tokens/"+tok.ID, nil); code != 204 {
					t.Fatalf("alice revokes her token: %d", code)
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", release(a), "", "Authorization", "Bearer "+a.state["gone"].(token).Token)
			},
			status: 401, says: "not signed in",
		},
		{
			// A page of another site can make a browser send a query, a
			// form or a cookie, never an Authorization header: a token
			// anywhere but that header is nobody.
			name:  "TokenInQueryFormOrCookie",
			setup: demoToken,
			attack: func(t *testing.T, a *arena) *http.Response {
				secret := a.state["demo"].(token).Token
				return a.do(t, "POST", release(a)+"?access_token="+secret, "access_token="+secret,
					"Content-Type", "application/x-www-form-urlencoded",
					"Cookie", "corral_vdi_session="+secret+"; access_token="+secret)
			},
			status: 401, says: "not signed in",
		},
		{
			// A page of another site that learnt a token sends it from a
			// browser: the change is cross-site and refused.
			name:  "BearerTokenCrossSite",
			setup: demoToken,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", release(a), "", "Authorization", "Bearer "+a.state["demo"].(token).Token,
					"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "sent from https://evil.example",
		},
		{
			// A page of another site makes a token with alice's cookie.
			name:  "TokenCreationCrossSite",
			setup: aliceCookie,
			attack: func(t *testing.T, a *arena) *http.Response {
				c := a.state["alice cookie"].(*http.Cookie)
				return a.do(t, "POST", "/api/vdi/tokens", `{"name": "stolen", "pools": ["*"]}`, "Cookie", c.Name+"="+c.Value,
					"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "sent from https://evil.example",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				var list []token
				a.p.API(t, "alice", "GET", "/api/vdi/tokens", &list)
				for _, tk := range list {
					if tk.Name == "stolen" {
						t.Error("the cross-site request made a token")
					}
				}
			},
		},
		{
			// The same with the Tokens page's form.
			name:  "TokenFormCrossSite",
			setup: aliceCookie,
			attack: func(t *testing.T, a *arena) *http.Response {
				c := a.state["alice cookie"].(*http.Cookie)
				return a.do(t, "POST", "/tokens", "name=stolen&pools=*&expires=720h", "Cookie", c.Name+"="+c.Value,
					"Content-Type", "application/x-www-form-urlencoded", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "sent from https://evil.example",
		},
		{
			// An agent with a token for one pool makes itself a token for
			// every pool, or one that never ends.
			name:  "TokenMakesATokenForMore",
			setup: demoToken,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/tokens", `{"name": "wider", "pools": ["*"], "expires": "8000h"}`,
					"Authorization", "Bearer "+a.state["demo"].(token).Token)
			},
			status: 403, says: "cannot make tokens",
		},
		{
			name: "NonAdminMakesAnAdminToken",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/tokens", `{"name": "root", "pools": ["*"], "admin": true}`, "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins make admin tokens",
		},
		{
			// An admin's plain token for every pool force-releases alice's
			// desktop: a token is no admin unless made one.
			name: "AdminsPlainTokenForceReleases",
			setup: func(t *testing.T, a *arena) {
				tokenFor(t, a, "ops plain", admin, `{"name": "helper", "pools": ["*"]}`)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", release(a), "", "Authorization", "Bearer "+a.state["ops plain"].(token).Token)
			},
			status: 403, says: "is not yours",
		},
	}
}
