package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// consoleUXAttacks are the attack table's rows for the console page's
// parts of issue 32: the viewers long poll, the home page's notices and
// the HTML 404, each as an attacker would try them.
func consoleUXAttacks() []attack {
	body := func(t *testing.T, res *http.Response) string {
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return string(b)
	}
	return []attack{
		// Mallory asks who watches alice's desktop (it would tell her
		// when alice is helped, and hold a long poll on alice's claim).
		{
			name: "ViewersOfAnotherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/desktops/local/"+a.victim+"/viewers", "", "Tailscale-User-Login", "mallory")
			},
			status: 403,
		},
		// Mallory asks how alice's console is relayed.
		{
			name: "LinkOfAnotherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/desktops/local/"+a.victim+"/link", "", "Tailscale-User-Login", "mallory")
			},
			status: 403,
		},
		// An admin answers for the holder, to let their own watch in on a
		// pool that asks the holder's consent.
		{
			name: "AdminAllowsTheirOwnWatch",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/viewers/1-0/allow", "", "Tailscale-User-Login", admin,
					"Sec-Fetch-Site", "same-origin")
			},
			status: 403, says: "Only the desktop's holder",
		},
		// A page on the user's machine links to the home page with a
		// notice claiming alice's desktop was released while she holds it:
		// the page says nothing (the query never carries text, and the
		// notice is checked against what alice holds).
		{
			name: "ForgedReleasedNotice",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/?notice=released&about=local/"+a.victim, "", "Tailscale-User-Login", "alice", "Sec-Fetch-Site", "cross-site")
			},
			status: 200,
			after: func(t *testing.T, a *arena, res *http.Response, b string) {
				if strings.Contains(b, `data-testid="notice"`) {
					t.Errorf("the home page shows a forged notice of a release of a desktop alice holds")
				}
			},
		},
		// The same with text of the attacker's in the query: never shown.
		{
			name: "NoticeWithAttackerText",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/?notice=Your+password+expired.+Call+555&about=local/demo", "", "Tailscale-User-Login", "alice")
			},
			status: 200,
			after: func(t *testing.T, a *arena, res *http.Response, b string) {
				if strings.Contains(b, "555") || strings.Contains(b, `data-testid="notice"`) {
					t.Errorf("the home page shows text from the query")
				}
			},
		},
		// A 404 page that echoes the path must escape it.
		{
			name: "NotFoundPageEscapesThePath",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/%3Cscript%3Ealert(1)%3C/script%3E", "", "Tailscale-User-Login", "alice")
			},
			status: 404, says: "Back to my desktops",
			after: func(t *testing.T, a *arena, res *http.Response, b string) {
				if strings.Contains(b, "<script>alert") {
					t.Errorf("the 404 page reflects the path unescaped")
				}
				if ct := res.Header.Get("Content-Security-Policy"); ct == "" {
					t.Errorf("the 404 page has no Content-Security-Policy")
				}
			},
		},
		// Reloading the page a refused claim leads to never claims: the
		// form answers with a redirect to a GET, whatever happened.
		{
			name: "ClaimFormRefusalIsARedirect",
			attack: func(t *testing.T, a *arena) *http.Response {
				res := a.do(t, "POST", "/pools/local/nosuchpool/claim", "", "Tailscale-User-Login", "mallory",
					"Sec-Fetch-Site", "same-origin", "Content-Type", "application/x-www-form-urlencoded")
				if loc := res.Header.Get("Location"); res.StatusCode == 303 && strings.HasPrefix(loc, "/?notice=") {
					body(t, res)
					return a.do(t, "GET", loc, "", "Tailscale-User-Login", "mallory")
				}
				t.Errorf("a refused claim form answers %d (Location %q); want 303 to /?notice=", res.StatusCode, res.Header.Get("Location"))
				return res
			},
			status: 200,
		},
	}
}
