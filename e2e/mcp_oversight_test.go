package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mxschmitt/playwright-go"
)

// TestMCP_Oversight: a desktop an agent works in says so on its
// holder's home page, console page and on the dashboard; alice, watching it in
// Chromium, sees the agent type; when she types in her own console she
// takes control, and the agent's next input says so while its
// screenshots go on.
func TestMCP_Oversight(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	tok := mustToken(t, p, "alice", `{"name": "test-runner", "pools": ["local/demo"]}`)
	s := mustMCP(t, p, tok.Token)
	var c struct{ Desktop string }
	jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/demo"})), &c)
	tool(t, s, "move", map[string]any{"desktop": c.Desktop, "x": 5, "y": 5})

	for _, page := range []struct{ user, path string }{{"alice", "/"}, {"ops", "/admin"}} {
		code, body := p.bearer(t, "", "GET", page.path, "", "Tailscale-User-Login", page.user)
		if code != 200 || !strings.Contains(body, "bot:alice/test-runner") {
			t.Errorf("%s's %s: %d, does not name bot:alice/test-runner", page.user, page.path, code)
		}
	}

	// Alice watches her desktop in Chromium while the agent works: what
	// the agent types shows on her screen; then she types and so takes
	// control.
	waitFor(t, 2*time.Minute, "the desktop's screen to settle", func() bool {
		return strings.HasPrefix(resultText(tool(t, s, "wait_for_change", map[string]any{"desktop": c.Desktop, "timeout_ms": 3000})), "no change")
	})
	b := MustLaunchBrowser(t)
	page, _ := MustOpenConsole(t, b, p, "alice", "demo", 1280, 800, false)
	must(t, playwright.NewPlaywrightAssertions(20000).Locator(page.GetByTestId("agent-notice")).ToContainText("bot:alice/test-runner"))
	shown := func() string {
		v, err := page.Evaluate(`() => document.querySelector('#screen canvas').toDataURL('image/png')`)
		must(t, err)
		return v.(string)
	}
	var before string
	waitFor(t, time.Minute, "alice's screen to hold still", func() bool {
		a := shown()
		time.Sleep(time.Second)
		before = shown()
		return a == before
	})
	tool(t, s, "click", map[string]any{"desktop": c.Desktop, "x": 300, "y": 200}) // the xterm at +40+40
	tool(t, s, "type_text", map[string]any{"desktop": c.Desktop, "text": "echo the-agent-typed-this"})
	waitFor(t, time.Minute, "the agent's typing on alice's screen in Chromium", func() bool { return shown() != before })
	screenshot(t, page, "watching-the-agent")

	must(t, page.Locator("#screen canvas").Click())
	var said string
	waitFor(t, time.Minute, "the agent's input suspended once alice typed", func() bool {
		must(t, page.Keyboard().Press("Shift"))
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "type_text", Arguments: map[string]any{"desktop": c.Desktop, "text": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		said = resultText(res)
		return res.IsError
	})
	if !strings.Contains(said, "alice took control") {
		t.Errorf("the suspended agent was told %q", said)
	}
	if res := tool(t, s, "screenshot", map[string]any{"desktop": c.Desktop}); len(res.Content) == 0 {
		t.Error("no screenshot while alice has control")
	}
	for _, size := range []struct { // the agent notice at the other sizes
		name          string
		width, height int
	}{{"tablet", 1024, 1366}, {"phone", 390, 844}} {
		must(t, page.SetViewportSize(size.width, size.height))
		screenshot(t, page, "agent-notice-"+size.name)
	}
}
