package e2e

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// shareAttacks are the attack table's rows on invitations (issue #33):
// an invitation opens one desktop's screen for one user, view only unless
// it says control, and only its holder (or an admin) manages them.
func shareAttacks() []attack {
	return []attack{
		{
			// bob holds an invitation to mallory's desktop and opens
			// alice's with it: an invitation names its desktop.
			name: "InviteeOpensAnotherDesktop",
			setup: func(t *testing.T, a *arena) {
				a.invite(t, "mallory", "local/"+a.mallorys, "bob", false)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				h := http.Header{"Tailscale-User-Login": {"bob"}, "Origin": {"http://" + a.host}}
				ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/vnc/local/"+a.victim, h)
				if err == nil {
					ws.Close()
				}
				return res
			},
			status: 403, says: "no invitation to it is open for you",
		},
		{
			// A view-only invitee's keys, pointer, clipboard, resize and
			// reboot never reach the holder's desktop: the relay drops them.
			name: "ViewOnlyInviteeTypesIntoTheDesktop",
			setup: func(t *testing.T, a *arena) {
				a.state["share"] = a.invite(t, "alice", "local/"+a.victim, "carol", false)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := a.console(t, "carol", "/ws/vnc/local/"+a.victim)
				rfbClient(t, ws, rfbInputs())
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				noInputReached(t, a, "carol")
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["share"].(string), nil); code != 204 {
					t.Errorf("alice revokes carol's invitation: %d", code)
				}
			},
		},
		{
			// An invitation shares the terminal the holder has open; it
			// never opens a shell of its own on the holder's desktop.
			name: "InviteeOpensATerminalNobodyHasOpen",
			setup: func(t *testing.T, a *arena) {
				a.state["erin"] = a.invite(t, "alice", "local/"+a.victim, "erin", false)
				waitFor(t, 10*time.Second, "alice's earlier consoles closed", func() bool { return len(a.openSessions(t)) == 0 })
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Tailscale-User-Login", "erin", "Origin", "http://"+a.host)
			},
			status: 409, says: "Ask alice to open it",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["erin"].(string), nil); code != 204 {
					t.Errorf("alice revokes erin's invitation: %d", code)
				}
			},
		},
		{
			// A view-only invitee on the holder's terminal types a command
			// and resizes it: neither reaches the shell (the pty echoes
			// what it gets, so the holder would see it).
			name: "ViewOnlyInviteeTypesIntoTheTerminal",
			setup: func(t *testing.T, a *arena) {
				a.state["aliceTerm"], _ = a.console(t, "alice", "/ws/terminal/local/"+a.victim)
				a.state["frank"] = a.invite(t, "alice", "local/"+a.victim, "frank", false)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := a.console(t, "frank", "/ws/terminal/local/"+a.victim)
				ws.WriteMessage(websocket.BinaryMessage, []byte("echo frank-was-$((2*3))\r"))
				ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":33,"rows":7}`))
				time.Sleep(300 * time.Millisecond) // let the relay pass them on (or not)
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				ws := a.state["aliceTerm"].(*websocket.Conn)
				ws.WriteMessage(websocket.BinaryMessage, []byte("stty size; echo alice-$((6*7))\r"))
				out := readUntilWS(t, ws, "alice-42", 10*time.Second)
				if strings.Contains(out, "frank-was-6") || strings.Contains(out, "7 33") {
					t.Errorf("frank, view only, reached alice's shell:\n%s", out)
				}
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["frank"].(string), nil); code != 204 {
					t.Errorf("alice revokes frank's invitation: %d", code)
				}
			},
		},
		{
			// An admin beside the holder joins her terminal view only,
			// as a view-only invitee does: ops reads alice's shell, and
			// ops's command and resize never reach it (before, ops got
			// a shell of their own beside hers).
			name: "AdminTypesIntoTheHoldersTerminal",
			setup: func(t *testing.T, a *arena) {
				a.state["aliceWatched"], _ = a.console(t, "alice", "/ws/terminal/local/"+a.victim)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := a.console(t, admin, "/ws/terminal/local/"+a.victim)
				ws.WriteMessage(websocket.BinaryMessage, []byte("echo ops-was-$((2*3))\r"))
				ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":33,"rows":7}`))
				time.Sleep(300 * time.Millisecond) // let the relay pass them on (or not)
				a.state["opsTerm"] = ws
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				ws := a.state["aliceWatched"].(*websocket.Conn)
				ws.WriteMessage(websocket.BinaryMessage, []byte("stty size; echo alice-$((6*7))\r"))
				if out := readUntilWS(t, ws, "alice-42", 10*time.Second); strings.Contains(out, "ops-was-6") || strings.Contains(out, "7 33") {
					t.Errorf("ops, watching, reached alice's shell:\n%s", out)
				}
				readUntilWS(t, a.state["opsTerm"].(*websocket.Conn), "alice-42", 10*time.Second) // ops watches alice's shell
			},
		},
		{
			// alice closes her terminal while grace, invited with control,
			// is on it: grace's console ends with it. She never keeps
			// alice's shell, typing into it unseen, nor holds it open
			// beside the one alice opens next (a second shell, or on
			// KubeVirt a serial line whose next client kicks hers).
			name: "InviteeKeepsTheTerminalTheHolderClosed",
			setup: func(t *testing.T, a *arena) {
				a.state["aliceClosing"], _ = a.console(t, "alice", "/ws/terminal/local/"+a.victim)
				var sh struct{ ID string }
				if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/local/"+a.victim+"/shares", `{"user":"grace","control":true}`, &sh); code != 201 {
					t.Fatalf("alice invites grace with control: %d", code)
				}
				a.state["grace"] = sh.ID
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := a.console(t, "grace", "/ws/terminal/local/"+a.victim)
				ws.WriteMessage(websocket.BinaryMessage, []byte("echo grace-in-$((3*5))\r"))
				readUntilWS(t, ws, "grace-in-15", 10*time.Second) // control while alice's is open
				a.state["aliceClosing"].(*websocket.Conn).Close()
				a.state["graceTerm"] = ws
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				ws := a.state["graceTerm"].(*websocket.Conn)
				ws.SetReadDeadline(time.Now().Add(10 * time.Second))
				for {
					if _, _, err := ws.ReadMessage(); err != nil {
						if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
							t.Error("grace's terminal still open 10 s after alice closed hers; want it ended with alice's: she keeps alice's shell")
						}
						break
					}
				}
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["grace"].(string), nil); code != 204 {
					t.Errorf("alice revokes grace's invitation: %d", code)
				}
			},
		},
		{
			// ivy listens to alice's desktop on her invitation, which
			// alice then revokes: the sound ends with it, as the
			// consoles do (console.Sessions.Listen).
			name: "InviteeListensOnOnceRevoked",
			setup: func(t *testing.T, a *arena) {
				a.state["ivy"] = a.invite(t, "alice", "local/"+a.victim, "ivy", false)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := a.console(t, "ivy", "/ws/audio/local/"+a.victim)
				a.state["ivySound"] = ws
				return res
			},
			status: 101,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				ws := a.state["ivySound"].(*websocket.Conn)
				packets, ended := make(chan struct{}, 64), make(chan error, 1)
				go func() {
					for {
						if _, _, err := ws.ReadMessage(); err != nil {
							ended <- err
							return
						}
						select {
						case packets <- struct{}{}:
						default:
						}
					}
				}()
				for range 3 { // the hello, then the sound plays
					select {
					case <-packets:
					case err := <-ended:
						t.Fatalf("ivy's sound ended before alice revoked her invitation: %v", err)
					case <-time.After(10 * time.Second):
						t.Fatal("ivy's sound sent nothing for 10 s")
					}
				}
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["ivy"].(string), nil); code != 204 {
					t.Fatalf("alice revokes ivy's invitation: %d", code)
				}
				select {
				case err := <-ended:
					t.Logf("ivy's sound ended with the revocation: %v", err)
				case <-time.After(10 * time.Second):
					t.Error("ivy's sound still plays 10 s after alice revoked her invitation; want it ended with the invitation")
				}
			},
		},
		{
			// A view-only invitee hands themself control.
			name: "InviteeHandsThemselfControl",
			setup: func(t *testing.T, a *arena) {
				a.state["dave"] = a.invite(t, "alice", "local/"+a.victim, "dave", false)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PATCH", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["dave"].(string), `{"control":true}`,
					"Tailscale-User-Login", "dave", "Content-Type", "application/json")
			},
			status: 403,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["dave"].(string), nil); code != 204 {
					t.Errorf("alice revokes dave's invitation: %d", code)
				}
			},
		},
		{
			// Only the holder and admins see who is invited.
			name: "StrangerListsInvitations",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/desktops/local/"+a.victim+"/shares", "", "Tailscale-User-Login", "mallory")
			},
			status: 403,
		},
		{
			// mallory invites herself to alice's desktop.
			name: "StrangerInvitesThemself",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/shares", `{"user":"mallory","control":true}`,
					"Tailscale-User-Login", "mallory", "Content-Type", "application/json")
			},
			status: 403,
		},
		{
			// An invitation lives a day at most.
			name: "InvitationForAYear",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/shares", `{"user":"bob","expires":"8760h"}`,
					"Tailscale-User-Login", "alice", "Content-Type", "application/json")
			},
			status: 400, says: "from a minute to a day",
		},
	}
}

// console opens login's console websocket at path from the portal's own
// origin; it closes when the test (or row) ends.
func (a *arena) console(t *testing.T, login, path string) (*websocket.Conn, *http.Response) {
	t.Helper()
	h := http.Header{"Tailscale-User-Login": {login}, "Origin": {"http://" + a.host}}
	ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+path, h)
	if err != nil {
		t.Fatalf("%s opens %s: %v", login, path, err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws, res
}

// invite has holder invite user to desktop (ns/member), with control or
// view only, and returns the invitation's id.
func (a *arena) invite(t *testing.T, holder, desktop, user string, control bool) string {
	t.Helper()
	var sh struct{ ID string }
	body := fmt.Sprintf(`{"user":%q,"control":%v}`, user, control)
	if code := a.p.APIBody(t, holder, "POST", "/api/vdi/desktops/"+desktop+"/shares", body, &sh); code != 201 {
		t.Fatalf("%s invites %s to %s: %d", holder, user, desktop, code)
	}
	return sh.ID
}
