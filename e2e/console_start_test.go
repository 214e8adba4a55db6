package e2e

import (
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsoleStart_EarlyVNCSocket: the console page opens its VNC
// websocket as it starts (console-early.js), before /connect answers, and
// noVNC takes that socket with what the desktop sent before it listened:
// the desktop draws over one websocket, one console session. Asked for
// the terminal, the page opens no VNC socket at all; Reconnect opens a
// fresh one.
func TestConsoleStart_EarlyVNCSocket(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1280, 800)
	var sockets []string
	page.OnWebSocket(func(ws playwright.WebSocket) { sockets = append(sockets, ws.URL()) })
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	v, err := page.Evaluate(`() => {
	  const at = (n) => performance.getEntriesByName(n).map((e) => e.startTime + e.duration)[0] ?? -1;
	  return [at('ws-early'), at('connect-read'), document.getElementById('screen').rfb ? 1 : 0];
	}`)
	must(t, err)
	got := v.([]any)
	if early, read := toFloat(got[0]), toFloat(got[1]); early < 0 || early > read {
		t.Errorf("the early VNC socket opened at %.0f ms, /connect read at %.0f ms; want it opened first", early, read)
	}
	consoleDrawn(t, page)
	if len(sockets) != 1 {
		t.Errorf("the console page opened websockets %q; want the one VNC socket", sockets)
	}
	var sessions []struct {
		Protocol string    `json:"protocol"`
		Closed   time.Time `json:"closed"`
	}
	p.API(t, "ops", "GET", "/api/vdi/history/sessions?user=alice&limit=100", &sessions)
	if len(sessions) != 1 || sessions[0].Protocol != "vnc" || !sessions[0].Closed.IsZero() {
		t.Errorf("alice's console sessions: %+v; want one open VNC session", sessions)
	}

	// The terminal: no VNC socket opened ahead.
	sockets = nil
	_, err = page.Goto(p.URL + "/desktops/local/" + d.Name + "?protocol=terminal")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	for _, u := range sockets {
		if !contains(u, "/ws/terminal/") {
			t.Errorf("the terminal page opened %s", u)
		}
	}

	// VNC again, its socket dropped: Reconnect opens a new one and draws.
	_, err = page.Goto(p.URL + "/desktops/local/" + d.Name)
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	sockets = nil
	_, err = page.Evaluate(`() => document.getElementById('screen').rfb.disconnect()`)
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("reconnect")).ToBeVisible())
	must(t, page.GetByTestId("reconnect").Click())
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	if len(sockets) != 1 {
		t.Errorf("Reconnect opened websockets %q; want one", sockets)
	}
}
