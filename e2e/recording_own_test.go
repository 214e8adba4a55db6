package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// ownRecordedTerminal creates pool (one member, recorded, ownRecordings)
// as admin, has user claim it and run command in its terminal until want
// shows, and returns the finished recording's id.
func ownRecordedTerminal(t *testing.T, p *Portal, admin, pool, user, command, want string) string {
	t.Helper()
	if code := p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name": "`+pool+`", "size": 1, "policy": {"record": true, "ownRecordings": true}}`, nil); code != 201 {
		t.Fatalf("create pool: %d", code)
	}
	var d desktop
	if code := p.API(t, user, "POST", "/api/vdi/pools/local/"+pool+"/claim", &d); code != 200 {
		t.Fatalf("%s claims: %d", user, code)
	}
	ws, _, err := dialWS(p, user, "/ws/terminal/local/"+d.Name, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	must(t, ws.WriteMessage(websocket.TextMessage, []byte(command+"\r")))
	readUntilWS(t, ws, want, 10*time.Second)
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	ws.Close()
	return recordings(t, p, d.Name, 1)["terminal"].ID
}

// TestRecording_OwnPlayback: on a pool with ownRecordings, a user finds
// their recorded session in My sessions, plays it back in Chromium and
// downloads it; another user is refused it; once an admin turns the rule
// off, the link and the file are gone for the user (admins keep them).
func TestRecording_OwnPlayback(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	id := ownRecordedTerminal(t, p, "ops", "mine", "alice", "echo mine-$((20+22))", "mine-42")

	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/history")
	link := page.GetByTestId("my-recording")
	must(t, expect.Locator(link).ToHaveCount(1))
	screenshot(t, page, "my-sessions-with-recording")
	must(t, link.Click())
	player := page.GetByTestId("player")
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ready"))
	_, err := page.GetByTestId("speed").SelectOption(playwright.SelectOptionValues{Values: &[]string{"16"}})
	must(t, err)
	must(t, page.GetByTestId("play").Click())
	must(t, expect.Locator(player).ToHaveAttribute("data-state", "ended"))
	must(t, expect.Locator(player).ToContainText("mine-42"))
	must(t, expect.Locator(page.GetByRole("link", playwright.PageGetByRoleOptions{Name: "My sessions"})).ToBeVisible())
	screenshot(t, page, "my-recording-playback")
	for _, size := range issueSizes { // the header's links stay on the screen
		must(t, page.SetViewportSize(size.width, size.height))
		withinWidth(t, page.Locator("header.bar a.button"), "the player's link at "+size.name)
		screenshot(t, page, "my-recording-playback-"+size.name)
	}

	if code, _, body := download(t, p, "alice", id); code != 200 || !strings.Contains(castOutput(t, body), "mine-42") {
		t.Errorf("alice downloads her own recording: %d; want 200 with her output", code)
	}
	if code, _, _ := download(t, p, "mallory", id); code != http.StatusForbidden {
		t.Errorf("mallory downloads alice's recording: %d; want 403", code)
	}
	if code := get(t, p.URL+"/history/recordings/"+id, signInByName(t, p, "mallory")); code != http.StatusForbidden {
		t.Errorf("mallory opens alice's playback page: %d; want 403", code)
	}
	if code := get(t, p.URL+"/admin/recordings/"+id, signInByName(t, p, "alice")); code != http.StatusForbidden {
		t.Errorf("alice opens the admins' playback page: %d; want 403", code)
	}
	if !auditHas(t, p, "user=alice", "alice", "recording-play", id) || !auditHas(t, p, "user=alice", "alice", "recording-download", id) {
		t.Error("alice's playback and download are not both in the audit log")
	}

	// The admin turns the rule off: it is the pool's rule as it is now.
	if code := p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/local/mine", `{"policy": {"record": true}}`, nil); code != 200 {
		t.Fatalf("turn ownRecordings off: %d", code)
	}
	if _, err := page.Goto(p.URL + "/history"); err != nil {
		t.Fatal(err)
	}
	must(t, expect.Locator(page.GetByTestId("my-session")).Not().ToHaveCount(0))
	must(t, expect.Locator(page.GetByTestId("my-recording")).ToHaveCount(0))
	if code, _, _ := download(t, p, "alice", id); code != http.StatusForbidden {
		t.Errorf("alice downloads her recording after the rule is off: %d; want 403", code)
	}
	if code, _, _ := download(t, p, "ops", id); code != 200 {
		t.Errorf("the admin downloads it: %d; want 200", code)
	}
}
