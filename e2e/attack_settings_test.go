package e2e

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// settingAttacks are the attack table's rows on the settings the portal
// keeps for each user (#57: the console's Size choice, the keyboard layout
// of VM consoles): only the signed-in user's own, from the portal's own
// pages, and only a Size choice or a layout the page knows.
func settingAttacks() []attack {
	aliceCookie := func(t *testing.T, a *arena) {
		if a.state["alice cookie"] == nil {
			a.state["alice cookie"] = a.signIn(t, "alice")
		}
	}
	const size = "/api/vdi/settings/size"
	const layout = "/api/vdi/settings/keyboard"
	return []attack{
		{
			// A page of another site sets alice's Size with her cookie, to
			// have her desktop made 65535 px wide on her next console.
			name:  "SizeSetCrossSite",
			setup: aliceCookie,
			attack: func(t *testing.T, a *arena) *http.Response {
				c := a.state["alice cookie"].(*http.Cookie)
				return a.do(t, "PUT", size, `{"size": "65535x65535"}`, "Cookie", c.Name+"="+c.Value, "Content-Type", "application/json",
					"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "sent from https://evil.example",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				if page := a.consolePage(t, "alice"); strings.Contains(page, `data-size="65535x65535"`) {
					t.Error("the cross-site request set alice's Size")
				}
			},
		},
		{
			// A Size that is no choice: markup for the page that carries
			// it, and a long value for the database.
			name: "SizeSetNotAChoice",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", size, `{"size": "\"><script>alert(1)</script>`+strings.Repeat("9", 60000)+`"}`,
					"Tailscale-User-Login", "alice", "Content-Type", "application/json")
			},
			status: 400, says: "is not a Size choice",
		},
		{
			// A page of another site sets alice's keyboard layout with her
			// cookie, so that her VM types other characters than hers.
			name:  "LayoutSetCrossSite",
			setup: aliceCookie,
			attack: func(t *testing.T, a *arena) *http.Response {
				c := a.state["alice cookie"].(*http.Cookie)
				return a.do(t, "PUT", layout, `{"keyboard": "fr"}`, "Cookie", c.Name+"="+c.Value, "Content-Type", "application/json",
					"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "sent from https://evil.example",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				if page := a.consolePage(t, "alice"); strings.Contains(page, `data-layout="fr"`) {
					t.Error("the cross-site request set alice's keyboard layout")
				}
			},
		},
		{
			// A layout the page has no table for: markup for the page that
			// carries it, and a long value for the database.
			name: "LayoutSetNotALayout",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", layout, `{"keyboard": "\"><script>alert(1)</script>`+strings.Repeat("x", 60000)+`"}`,
					"Tailscale-User-Login", "alice", "Content-Type", "application/json")
			},
			status: 400, says: "is not a keyboard layout",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				if page := a.consolePage(t, "alice"); strings.Contains(page, "alert(1)") {
					t.Error("the refused layout reached alice's console page")
				}
			},
		},
	}
}

// consolePage returns login's console page of the arena's victim desktop.
func (a *arena) consolePage(t *testing.T, login string) string {
	t.Helper()
	res := a.do(t, "GET", "/desktops/local/"+a.victim, "", "Tailscale-User-Login", login)
	defer res.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, res.Body); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
