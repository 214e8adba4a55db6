package e2e

import (
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// recordingAttacks are the attack suite's rows on recordings: only admins
// list, download or play them, and a recording id is never a path.
func recordingAttacks() []attack {
	return []attack{
		{
			name:  "NonAdminListsRecordings",
			setup: recordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/recordings", "", "Tailscale-User-Login", "alice")
			},
			status: 403, says: "Only admins",
		},
		{
			name:  "NonAdminDownloadsARecording",
			setup: recordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/recordings/"+a.state["recording"].(string), "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins",
		},
		{
			name:  "NonAdminPlaysARecording",
			setup: recordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/admin/recordings/"+a.state["recording"].(string), "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins",
		},
		{
			// Even an admin's id is looked up, never joined to a path.
			name: "RecordingIDPathTraversal",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/recordings/..%2F..%2Fportal.db", "", "Tailscale-User-Login", admin)
			},
			status: 404, says: "no recording",
		},
		{
			name: "RecordingIDDotDotBackslash",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/admin/recordings/..%5C..%5Ccookie.keys", "", "Tailscale-User-Login", admin)
			},
			status: 404, says: "no recording",
		},
	}
}

// recordedSession makes, once per arena, a recorded pool whose one member
// the admin holds and records one terminal session on, and keeps the
// recording's id in a.state["recording"].
func recordedSession(t *testing.T, a *arena) {
	t.Helper()
	if a.state["recording"] != nil {
		return
	}
	p := a.p
	if code := p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name": "rec", "size": 1, "policy": {"record": true}}`, nil); code != 201 {
		t.Fatalf("create recorded pool: %d", code)
	}
	var d desktop
	if code := p.API(t, admin, "POST", "/api/vdi/pools/local/rec/claim", &d); code != 200 {
		t.Fatalf("admin claims: %d", code)
	}
	ws, _, err := dialWS(p, admin, "/ws/terminal/local/"+d.Name, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	ws.WriteMessage(websocket.TextMessage, []byte("echo secret-$((1+1))\r"))
	readUntilWS(t, ws, "secret-2", 10*time.Second)
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	ws.Close()
	a.state["recording"] = recordings(t, p, d.Name, 1)["terminal"].ID
}
