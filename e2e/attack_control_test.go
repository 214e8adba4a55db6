package e2e

import (
	"net/http"
	"testing"
	"time"
)

// controlAttacks are the attack table's rows for Request control (issue
// 58, item 8): only an admin watching a desktop asks its holder for
// control, only the holder answers, never from another site, and only
// the holder's answer opens a console with control.
func controlAttacks() []attack {
	control := func(a *arena) string { return "/api/vdi/desktops/local/" + a.victim + "/control" }
	return []attack{
		// Mallory, no admin, asks alice for control of her desktop.
		{
			name: "NonAdminRequestsControl",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", control(a), "", "Tailscale-User-Login", "mallory", "Sec-Fetch-Site", "same-origin")
			},
			status: 403,
		},
		// An admin who is not watching asks: only a watch may become help.
		{
			name: "AdminNotWatchingRequestsControl",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", control(a), "", "Tailscale-User-Login", admin, "Sec-Fetch-Site", "same-origin")
			},
			status: 403, says: "not watching",
		},
		// A page on another site makes the admin's browser ask.
		{
			name: "CrossSiteControlRequest",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", control(a), "", "Tailscale-User-Login", admin, "Sec-Fetch-Site", "cross-site",
					"Origin", "http://evil.example")
			},
			status: 403,
		},
		// A page on another site makes the holder's browser answer Allow.
		{
			name: "CrossSiteControlAnswer",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/viewers/1-0/allow", "", "Tailscale-User-Login", "alice",
					"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example")
			},
			status: 403,
		},
		// Mallory answers for alice (AdminAllowsTheirOwnWatch: an admin).
		{
			name: "NotTheHolderAnswersControl",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/viewers/1-0/allow", "", "Tailscale-User-Login", "mallory",
					"Sec-Fetch-Site", "same-origin")
			},
			status: 403,
		},
		// Mallory takes back control alice gave someone (only the holder
		// ends it: a watcher would cut a helper off).
		{
			name: "NotTheHolderTakesBackControl",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/viewers/1-0/end", "", "Tailscale-User-Login", "mallory",
					"Sec-Fetch-Site", "same-origin")
			},
			status: 403,
		},
		// An admin opens alice's screen with "control" granted by an RDP
		// token the portal signed for them (/connect gives one): only the
		// holder's answer makes a grant.
		{
			name: "RDPTokenAsAControlGrant",
			env:  tokenEnv,
			attack: func(t *testing.T, a *arena) *http.Response {
				tok := mintRDPToken(t, tokenKeyNew, admin, "local/"+a.victim, time.Now().Add(time.Minute))
				return a.dialWS(t, "/ws/vnc/local/"+a.victim+"?control="+tok, "Tailscale-User-Login", admin, "Origin", "http://"+a.host)
			},
			status: 403, says: "grant of control",
		},
	}
}
