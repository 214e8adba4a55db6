package e2e

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
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
			// A pool that lets users play their own recordings lets
			// nobody play anyone else's.
			name:  "UserDownloadsAnothersOwnRecording",
			setup: ownRecordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/recordings/"+a.state["own-recording"].(string), "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins may play back this recording",
		},
		{
			name:  "UserPlaysAnothersOwnRecording",
			setup: ownRecordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/history/recordings/"+a.state["own-recording"].(string), "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins may play back this recording",
		},
		{
			// An unknown id answers as another's does: ids cannot be probed.
			name: "UserProbesRecordingIDs",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/api/vdi/recordings/no-such-session", "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins may play back this recording",
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

// ownRecordedSession makes, once per arena, a recorded pool with
// ownRecordings whose one member alice holds, and records one terminal
// session of hers, kept in a.state["own-recording"].
func ownRecordedSession(t *testing.T, a *arena) {
	t.Helper()
	if a.state["own-recording"] != nil {
		return
	}
	a.state["own-recording"] = ownRecordedTerminal(t, a.p, admin, "ownrec", "alice", "echo own-$((1+1))", "own-2")
}

// recordingDeleteAttacks are the rows on deleting recordings: admins only,
// and never from another site.
func recordingDeleteAttacks() []attack {
	return []attack{
		{
			name:  "NonAdminDeletesARecording",
			setup: recordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "DELETE", "/api/vdi/recordings/"+a.state["recording"].(string), "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "Only admins",
			after: recordingStillThere,
		},
		{
			name:  "CrossSiteDeleteOfARecording",
			setup: recordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "DELETE", "/api/vdi/recordings/"+a.state["recording"].(string), "", "Tailscale-User-Login", admin,
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403, says: "refused a request sent from http://evil.example",
			after: recordingStillThere,
		},
		{
			name:  "CrossSiteDeleteFormOfARecording",
			setup: recordedSession,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/admin/recordings/"+a.state["recording"].(string)+"/delete", "", "Tailscale-User-Login", admin,
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/x-www-form-urlencoded")
			},
			status: 403, says: "refused a request sent from http://evil.example",
			after: recordingStillThere,
		},
	}
}

// recordingStillThere checks that the arena's recording is still listed.
func recordingStillThere(t *testing.T, a *arena, _ *http.Response, _ string) {
	t.Helper()
	var rows []api.Recording
	a.p.API(t, admin, "GET", "/api/vdi/recordings", &rows)
	for _, r := range rows {
		if r.ID == a.state["recording"].(string) {
			return
		}
	}
	t.Errorf("recording %s is gone after a refused delete", a.state["recording"])
}

// TestAttack_RecordingsShare: mallory fills her share of a small
// recordings cap with terminal output; her session ends and her next
// recorded console is refused saying why, the dashboard names her, and
// alice's recorded console on the same pool is still recorded. An admin
// then deletes mallory's recording from the recordings page, confirmed
// on the page.
func TestAttack_RecordingsShare(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS="+admin, "CORRAL_VDI_DEMO_POOL_SIZE=0",
		"CORRAL_VDI_RECORDING_MAX_BYTES=1MiB", "CORRAL_VDI_RECORDING_MAX_BYTES_PER_USER=200KiB")
	if code := p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name": "rec", "size": 2, "policy": {"record": true}}`, nil); code != 201 {
		t.Fatalf("create recorded pool: %d", code)
	}
	var m, a desktop
	if code := p.API(t, "mallory", "POST", "/api/vdi/pools/local/rec/claim", &m); code != 200 {
		t.Fatalf("mallory claims: %d", code)
	}
	for range 6 { // each session until the recordings refuse her: her share, or (before the share) the whole cap
		ws, res, err := dialWS(p, "mallory", "/ws/terminal/local/"+m.Name, p.URL)
		if err != nil {
			if res == nil || res.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("mallory's console: %v %v", res, err)
			}
			break
		}
		ws.WriteMessage(websocket.TextMessage, []byte("head -c 600000 /dev/urandom | base64\r"))
		ws.SetReadDeadline(time.Now().Add(60 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				break
			}
		}
		ws.Close()
	}
	_, res, err := dialWS(p, "mallory", "/ws/terminal/local/"+m.Name, p.URL)
	if err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("mallory's console after filling her share: %v %v; want 503", res, err)
	}
	body, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(body), "your share") {
		t.Errorf("mallory's refusal: %s; want it to say her share is used", body)
	}

	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/rec/claim", &a); code != 200 {
		t.Fatalf("alice claims: %d", code)
	}
	ws, res, err := dialWS(p, "alice", "/ws/terminal/local/"+a.Name, p.URL)
	if err != nil {
		var b []byte
		if res != nil {
			b, _ = io.ReadAll(res.Body)
		}
		t.Fatalf("alice's recorded console after mallory filled hers: %v %s; want it recorded", err, b)
	}
	ws.WriteMessage(websocket.TextMessage, []byte("echo alice-$((6*7))\r"))
	readUntilWS(t, ws, "alice-42", 10*time.Second)
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	ws.Close()
	rec := recordings(t, p, a.Name, 1)["terminal"]
	if rec.User != "alice" || rec.Bytes == 0 {
		t.Errorf("alice's recording = %+v; want one of hers", rec)
	}
	// The admin CLI lists it and deletes it, as `recordings list|delete`.
	if out := p.mustCLI(t, "recordings", "list", "-user", "alice"); fields(out, rec.ID) == nil {
		t.Errorf("recordings list -user alice does not list %s:\n%s", rec.ID, out)
	}
	if out := p.mustCLI(t, "recordings", "delete", rec.ID); !strings.Contains(out, "deleted recording "+rec.ID) {
		t.Errorf("recordings delete: %s", out)
	}
	if out := p.mustCLI(t, "recordings", "list", "-user", "alice"); fields(out, rec.ID) != nil {
		t.Errorf("recordings list after the delete still lists %s:\n%s", rec.ID, out)
	}

	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	signIn(t, page, p, admin, "/admin")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	must(t, expect.Locator(page.GetByText("Recorded consoles of mallory are refused")).ToBeVisible())
	_, err = page.Goto(p.URL + "/admin/recordings?user=mallory")
	must(t, err)
	rows := page.GetByTestId("recording")
	n, err := rows.Count()
	must(t, err)
	if n == 0 {
		t.Fatal("the recordings page lists none of mallory's recordings")
	}
	screenshot(t, page, "recordings-delete-button")
	must(t, rows.First().GetByTestId("delete-recording").Locator("summary").Click())
	must(t, expect.Locator(rows.First().GetByTestId("delete-recording-confirm")).ToBeVisible())
	screenshot(t, page, "recordings-delete-confirm")
	must(t, rows.First().GetByTestId("delete-recording-confirm").Click())
	must(t, expect.Locator(page.GetByTestId("recording-deleted")).ToBeVisible())
	screenshot(t, page, "recordings-deleted")
	var left []api.Recording
	p.API(t, admin, "GET", "/api/vdi/recordings?user=mallory", &left)
	if len(left) != n-1 {
		t.Errorf("recordings of mallory after the delete: %d; want %d", len(left), n-1)
	}
	var audit []auditRow
	p.API(t, admin, "GET", "/api/vdi/history/audit?limit=20", &audit)
	if len(audit) == 0 || !slices.ContainsFunc(audit, func(r auditRow) bool { return r.Actor == admin && r.Action == "recording-delete" }) {
		t.Errorf("audit = %+v; want the admin's recording-delete", audit)
	}
}
