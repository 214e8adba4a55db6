package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsole_PageWarmsTheScreen: the holder's console page connects the
// desktop's screen as it goes out (warm VNC first pixels), and the page's
// websocket then takes that connection instead of dialing its own;
// another user's or an admin's page connects nothing.
func TestConsole_PageWarmsTheScreen(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	d := mustClaim(t, p, "alice", "demo")
	accepted := func() int { return screenConnections(p, d.Name) }
	time.Sleep(time.Second) // whatever the start itself connected is logged
	before := accepted()
	page := p.URL + "/desktops/local/" + d.Name
	if code := get(t, page, nil, "Tailscale-User-Login", "mallory"); code == 200 {
		t.Errorf("mallory's GET of alice's console page: 200")
	}
	get(t, page, nil, "Tailscale-User-Login", "ops")
	time.Sleep(500 * time.Millisecond)
	if n := accepted() - before; n != 0 {
		t.Fatalf("pages of others than the holder connected the screen %d times", n)
	}
	if code := get(t, page, nil, "Tailscale-User-Login", "alice"); code != 200 {
		t.Fatalf("alice's console page: %d", code)
	}
	waitFor(t, 10*time.Second, "the screen's connection the page warmed", func() bool { return accepted() == before+1 })
	ws, _, err := dialWS(p, "alice", "/ws/vnc/local/"+d.Name, p.URL)
	must(t, err)
	defer ws.Close()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := ws.ReadMessage()
	must(t, err)
	if !strings.HasPrefix(string(msg), "RFB 003.") {
		t.Fatalf("the console's first message: %q; want the RFB version", msg)
	}
	time.Sleep(500 * time.Millisecond)
	if n := accepted() - before; n != 1 {
		t.Errorf("the screen was connected %d times; want once, by the page, taken by its websocket", n)
	}
}

// TestConsole_PageCarriesItsVNCAnswer: a console page that opens VNC
// comes with /connect's answer (no RDP token or sign-in in it) and
// connects without asking; a page for RDP asks, as does a reconnect.
func TestConsole_PageCarriesItsVNCAnswer(t *testing.T) {
	p, member := mustVNCDesktop(t)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	url := p.URL + "/desktops/local/" + member
	signIn(t, page, p, "alice", "/desktops/local/"+member)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	connects := func(pg playwright.Page) int {
		v, err := pg.Evaluate(`() => performance.getEntriesByType('resource').filter((e) => /\/connect(\?|$)/.test(e.name)).length`)
		must(t, err)
		return toInt(v)
	}
	if n := connects(page); n != 0 {
		t.Errorf("the VNC console page asked /connect %d times; want none (its answer came with the page)", n)
	}
	html := func(u string) string {
		res, err := page.Request().Get(u)
		must(t, err)
		b, err := res.Body()
		must(t, err)
		return string(b)
	}
	vnc := html(url)
	if !strings.Contains(vnc, `id="connect-answer"`) || !strings.Contains(vnc, `"protocol":"vnc"`) {
		t.Errorf("the VNC console page carries no VNC answer")
	}
	for _, secret := range []string{`"token"`, `"credentials"`, `"password"`} {
		if strings.Contains(vnc, secret) {
			t.Errorf("the VNC console page's HTML holds %s", secret)
		}
	}
	if rdp := html(url + "?protocol=rdp"); strings.Contains(rdp, "connect-answer") || !strings.Contains(rdp, `rel="preload"`) {
		t.Errorf("the RDP console page carries an answer, or does not preload /connect: an RDP token must come from /connect only")
	}

	// A reconnect asks: the answer the page came with is used once.
	second, err := page.Context().NewPage()
	must(t, err)
	defer second.Close()
	_, err = second.Goto(url)
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("status")).ToContainText("another tab"))
	must(t, page.GetByTestId("reconnect").Click())
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	if n := connects(page); n != 1 {
		t.Errorf("the reconnect asked /connect %d times; want 1", n)
	}
}

// screenConnections counts the connections the portal made to member's
// screen, as its Xvnc logs them.
func screenConnections(p *Portal, member string) int {
	b, err := os.ReadFile(filepath.Join(p.DataDir, "local", "members", member, "state", "Xvnc.log"))
	if err != nil {
		b, _ = os.ReadFile(filepath.Join(p.DataDir, "local", "members", member, "run", "Xvnc.log"))
	}
	return strings.Count(string(b), "Connections: accepted")
}

// warmAttacks are the attack table's rows on the screen a console page
// connects ahead of its websocket.
func warmAttacks() []attack {
	return []attack{{
		// mallory loads alice's console page, to make the portal hold a
		// connection to alice's screen: refused, and nothing connected.
		name: "OpenAnothersConsolePageToWarmItsScreen",
		setup: func(t *testing.T, a *arena) {
			a.state["screen"] = screenConnections(a.p, a.victim)
		},
		attack: func(t *testing.T, a *arena) *http.Response {
			return a.do(t, "GET", "/desktops/local/"+a.victim, "", "Tailscale-User-Login", "mallory")
		},
		status: 403, says: "not yours",
		after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
			time.Sleep(500 * time.Millisecond)
			if n := screenConnections(a.p, a.victim) - a.state["screen"].(int); n != 0 {
				t.Errorf("mallory's page connected alice's screen %d times", n)
			}
		},
	}}
}
