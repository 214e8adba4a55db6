package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// preflightAttacks are the attack table's rows on a console's preflight:
// a plain GET of a console websocket's URL, which the console page sends
// before it dials to learn why a handshake would be refused. It is
// authorized as the websocket, and connects, joins and records nothing.
func preflightAttacks() []attack {
	return []attack{
		{
			// A page elsewhere opens alice's terminal websocket in her
			// browser (her identity, its own Origin), asking to be told a
			// refusal in band (relay.SubprotocolRefused): the Origin check
			// refuses it before any upgrade, and it reads nothing.
			name: "ForeignPageAsksForARefusalInBand",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "alice",
					"Origin", "https://evil.example", "Sec-WebSocket-Protocol", "corral-vdi.refused")
			},
			status: 403,
			after: func(t *testing.T, _ *arena, _ *http.Response, body string) {
				if strings.Contains(body, "console of") {
					t.Errorf("a foreign page read why alice's terminal is refused:\n%s", body)
				}
			},
		},
		{
			// mallory asks whether alice's terminal is open: refused as
			// the websocket is, learning nothing of it.
			name: "StrangerPreflightsTheHoldersTerminal",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/ws/terminal/local/"+a.victim, "", "Tailscale-User-Login", "mallory")
			},
			status: 403,
			after: func(t *testing.T, _ *arena, _ *http.Response, body string) {
				if strings.Contains(body, "console of") {
					t.Errorf("mallory's preflight of alice's terminal says whether it is open:\n%s", body)
				}
			},
		},
		{
			// A page elsewhere has alice's browser GET her terminal's
			// URL (an <img> sends her cookie, no Origin): it answers 204
			// and changes nothing. Before, it went on to the upgrade,
			// opening a shell recorded as her newest terminal, and the
			// one she shares could no longer be joined by her invitees.
			name: "PageMakesTheHolderGetHerTerminal",
			setup: func(t *testing.T, a *arena) {
				a.state["alicePreflighted"], _ = a.console(t, "alice", "/ws/terminal/local/"+a.victim)
				var sh struct{ ID string }
				if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/local/"+a.victim+"/shares", `{"user":"heidi"}`, &sh); code != 201 {
					t.Fatalf("alice invites heidi: %d", code)
				}
				a.state["heidi"] = sh.ID
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/ws/terminal/local/"+a.victim, "", "Tailscale-User-Login", "alice", "Sec-Fetch-Site", "cross-site", "Sec-Fetch-Dest", "image")
			},
			status: 204,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				alice := a.state["alicePreflighted"].(*websocket.Conn)
				heidi, _ := a.console(t, "heidi", "/ws/terminal/local/"+a.victim)
				alice.WriteMessage(websocket.BinaryMessage, []byte("echo still-$((4*4))\r"))
				readUntilWS(t, heidi, "still-16", 10*time.Second) // heidi joins alice's shell
				heidi.Close()
				alice.Close()
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["heidi"].(string), nil); code != 204 {
					t.Errorf("alice revokes heidi's invitation: %d", code)
				}
			},
		},
	}
}
