package e2e

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// sessionAttacks returns the rows on sessions, limits, watching, the CLI's
// identities, peers, entitlements and quotas, and what already held.
func sessionAttacks() []attack {
	return []attack{
		// Sessions: sign-out revokes a copied cookie.
		{
			name: "CopiedCookieAfterSignOut",
			setup: func(t *testing.T, a *arena) {
				c := a.signIn(t, "carol")
				res := a.do(t, "POST", "/signout", "", "Cookie", c.Name+"="+c.Value, "Origin", "http://"+a.host)
				res.Body.Close()
				if res.StatusCode != 303 {
					t.Fatalf("sign-out: %d", res.StatusCode)
				}
				a.state["carol"] = c
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				c := a.state["carol"].(*http.Cookie)
				return a.do(t, "GET", "/api/vdi/desktops", "", "Cookie", c.Name+"="+c.Value)
			},
			status: 401, says: "not signed in",
		},
		{
			name: "CookieAfterAdminEndedSessions",
			setup: func(t *testing.T, a *arena) {
				c := a.signIn(t, "dan")
				if code := a.p.API(t, admin, "POST", "/api/vdi/users/dan/end-sessions", nil); code != 200 {
					t.Fatalf("admin ends dan's sessions: %d", code)
				}
				a.state["dan"] = c
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				c := a.state["dan"].(*http.Cookie)
				return a.do(t, "GET", "/api/vdi/desktops", "", "Cookie", c.Name+"="+c.Value)
			},
			status: 401, says: "not signed in",
		},
		{
			name: "UserEndsAnothersSessions",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/users/alice/end-sessions", "", "Tailscale-User-Login", "mallory")
			},
			status: 403,
		},
		// Limits.
		{
			name: "ConsolesBeyondTheCap",
			setup: func(t *testing.T, a *arena) {
				for i := range 2 {
					res := a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
					if res.StatusCode != 101 {
						t.Fatalf("console %d of 2: %d", i+1, res.StatusCode)
					}
				}
				waitFor(t, 10*time.Second, "2 open consoles", func() bool { return len(a.openSessions(t)) == 2 })
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 429, says: "CORRAL_VDI_MAX_CONSOLES_PER_USER",
		},
		{
			name: "MetricsWithoutToken",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/metrics", "")
			},
			status: 401, says: "CORRAL_VDI_METRICS_TOKEN",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				res := a.do(t, "GET", "/metrics", "", "Authorization", "Bearer "+metricsToken)
				res.Body.Close()
				if res.StatusCode != 200 {
					t.Errorf("/metrics with the token: %d; want 200", res.StatusCode)
				}
			},
		},
		// Watching is view-only in the relay, not just in noVNC.
		{
			name: "WatcherTypesIntoTheHoldersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				h := http.Header{"Tailscale-User-Login": {admin}, "Origin": {"http://" + a.host}}
				ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/vnc/local/"+a.victim, h)
				if err != nil {
					t.Fatalf("admin watches %s: %v", a.victim, err)
				}
				defer ws.Close()
				rfbClient(t, ws, rfbInputs())
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) { noInputReached(t, a, admin) },
		},
		{
			name: "IdleConnectionsBeyondThePerClientCap",
			attack: func(t *testing.T, a *arena) *http.Response {
				// 127.0.0.2 is loopback but no trusted proxy: the cap is 64.
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}}
				for i := range 64 {
					c, err := d.Dial("tcp", a.host)
					if err != nil {
						t.Fatalf("idle connection %d: %v", i+1, err)
					}
					t.Cleanup(func() { c.Close() })
				}
				c, err := d.Dial("tcp", a.host)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				res, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Fatalf("the 65th connection read no answer: %v", err)
				}
				buf, _ := io.ReadAll(res.Body)
				res.Body = io.NopCloser(strings.NewReader(string(buf)))
				return res
			},
			status: 429, says: "Too many open connections",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				var pools []pool // other clients are still served
				if code := a.p.API(t, "alice", "GET", "/api/vdi/pools", &pools); code != 200 {
					t.Errorf("another client while 127.0.0.2 is at its cap: %d; want 200", code)
				}
			},
		},
		// CLI identities come only from the admin socket.
		{
			name: "AssignToCLIRoot",
			attack: func(t *testing.T, a *arena) *http.Response {
				free := a.freeMember(t)
				return a.do(t, "POST", "/api/vdi/desktops/local/"+free+"/assign", `{"user":"CLI:root"}`, "Tailscale-User-Login", admin)
			},
			status: 400, says: "not a user name",
		},
		{
			name: "UppercaseCLIHeader",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/desktops?all=1", "", "Tailscale-User-Login", "CLI:root")
			},
			status: 401,
		},
		// Peers: a signature is good once.
		{
			name: "PeerSignatureReplay",
			setup: func(t *testing.T, a *arena) {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), a.host, "vnc", "local", a.victim)
				res := a.dialWS(t, relay.PeerPath+"vnc/local/"+a.victim, relay.PeerAuthHeader, sig)
				if res.StatusCode != 101 {
					t.Fatalf("first use of a peer signature: %d", res.StatusCode)
				}
				a.state["sig"] = sig
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, relay.PeerPath+"vnc/local/"+a.victim, relay.PeerAuthHeader, a.state["sig"].(string))
			},
			status: 401, says: "good once",
		},
		{
			name: "PeerSignatureForAnotherPeer",
			attack: func(t *testing.T, a *arena) *http.Response {
				sig := relay.SignPeer([]byte(peerSecret), time.Now(), "10.9.9.9:8080", "terminal", "local", a.victim)
				return a.dialWS(t, relay.PeerPath+"terminal/local/"+a.victim, relay.PeerAuthHeader, sig)
			},
			status: 401,
		},

		// Entitlements and quotas: a pool is for those its access names.
		{
			name:  "ClaimFromAPoolNotEntitled",
			setup: entitledPool,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/pools/local/fin/claim", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "group finance",
		},
		{
			name:  "KioskOfAPoolNotEntitled",
			setup: entitledPool,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/kiosk/fin", "", "Tailscale-User-Login", "mallory", "Sec-Fetch-Site", "none",
					"Sec-Fetch-Dest", "document", "Sec-Fetch-Mode", "navigate")
			},
			status: 403, says: "group finance",
		},
		{
			name:  "AssignToAUserNotEntitled",
			setup: entitledPool,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/fin-1/assign", `{"user":"mallory"}`, "Tailscale-User-Login", admin)
			},
			status: 403, says: "may not use pool fin",
		},
		{
			name:  "AccessListsNoLogin",
			setup: entitledPool,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PATCH", "/api/vdi/pools/local/fin", `{"access":{"users":["not a login\n"]}}`, "Tailscale-User-Login", admin)
			},
			status: 400, says: "not a valid login",
		},
		{
			name: "DesktopBeyondTheQuota",
			env:  []string{"CORRAL_VDI_MAX_DESKTOPS_PER_USER=1"},
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name":"more","size":1}`, nil); code != 201 {
					t.Fatalf("create pool more: %d", code)
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/pools/local/more/claim", "", "Tailscale-User-Login", "mallory")
			},
			status: 409, says: "CORRAL_VDI_MAX_DESKTOPS_PER_USER",
		},

		// What already held, so that it stays held.
		{
			name: "OtherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/release", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "not yours",
		},
		{
			name: "OtherUsersDesktopMadeFresh", // issue 58: a stranger wipes nobody's desktop
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/start-fresh", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "not yours",
		},
		{
			name: "CrossSiteStartFresh",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/start-fresh", "", "Tailscale-User-Login", "alice",
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403,
		},
		{
			name: "CrossSiteStartForm",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/desktops/local/"+a.victim+"/start", "fresh=1", "Tailscale-User-Login", "alice",
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/x-www-form-urlencoded")
			},
			status: 403,
		},
		{
			name: "OtherUsersTerminal",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "not yours",
		},
		{
			name: "NonAdminCreatesPool",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/pools", `{"name":"evil","kind":"ct","mode":"ephemeral","source":"session","size":1}`, "Tailscale-User-Login", "mallory")
			},
			status: 403,
		},
		{
			name: "NonAdminReadsPoolJob", // issue 55: a job's progress and errors are the admins'
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/pools/local/demo/job", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins",
		},
		{
			name: "NonAdminListsJobs",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/jobs", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins",
		},
		{
			name: "NonAdminCancelsJob", // issue 55: only admins stop pool work
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/pools/local/demo/job/cancel", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins",
		},
		{
			name: "CrossSiteCancelJob", // a page elsewhere makes an admin's browser cancel a job
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/pools/local/demo/job/cancel", "", "Tailscale-User-Login", admin,
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403,
		},
		{
			name: "CrossSiteGrowJob", // a page elsewhere makes an admin's browser start a job
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PATCH", "/api/vdi/pools/local/demo", `{"size":5}`, "Tailscale-User-Login", admin,
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403,
		},
		{
			name: "CrossSiteReleaseWithoutOrigin",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/release", "", "Tailscale-User-Login", "alice",
					"Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "another site",
		},
		{
			name: "CrossSiteRelease",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/release", "", "Tailscale-User-Login", "alice",
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403,
		},
		{
			name: "ForeignOriginWebsocket",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://evil.example")
			},
			status: 403, says: "own origin",
		},
		{
			name: "WebsocketOriginOtherScheme",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "https://"+a.host)
			},
			status: 403, says: "own origin",
		},
		{
			name: "XSSInSignInNext",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/signin?next="+url.QueryEscape(`/x"><script>alert(1)</script>`), "")
			},
			status: 200,
			after: func(t *testing.T, a *arena, _ *http.Response, body string) {
				if strings.Contains(body, "<script>alert") {
					t.Error("the sign-in page echoes next unescaped")
				}
			},
		},
		{
			name: "OpenRedirectAfterSignIn",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/signin?next="+url.QueryEscape("//evil.example/"), "")
			},
			status: 200,
			after: func(t *testing.T, a *arena, _ *http.Response, body string) {
				if strings.Contains(body, "evil.example") {
					t.Error("the sign-in form carries a foreign next")
				}
			},
		},
		{
			name: "OversizedBody",
			attack: func(t *testing.T, a *arena) *http.Response {
				big := `{"reason":"` + strings.Repeat("x", 200<<10) + `"}`
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/release", big, "Tailscale-User-Login", "alice")
			},
			status: 400, says: "not valid JSON",
		},
	}
}
