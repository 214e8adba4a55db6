package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestMCP_Oversight: alice has her desktop's console open in Chromium
// when an agent with her token starts work in it; the page's notice
// says so at once, as home and the dashboard do. She sees the agent
// type; Take control suspends its input until she hands back (she
// never typed, so it is not the 30 s a person's input gives); Stop cuts
// the agent's call in flight and refuses every later one, naming her and
// what to do, until she lets it go on; and her own typing takes control
// too. A take or stop in a second tab of hers shows in the first live,
// and the other way round.
func TestMCP_Oversight(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	tok := mustToken(t, p, "alice", `{"name": "test-runner", "pools": ["local/demo"]}`)
	b := MustLaunchBrowser(t)
	page, _ := MustOpenConsole(t, b, p, "alice", "demo", 1280, 800, false)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(60000))
	notice := page.GetByTestId("agent-notice")
	must(t, expect.Locator(notice).ToBeHidden())

	// The agent starts after the page opened: the notice shows live.
	s := mustMCP(t, p, tok.Token)
	var c struct{ Desktop string }
	jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/demo"})), &c)
	tool(t, s, "move", map[string]any{"desktop": c.Desktop, "x": 5, "y": 5})
	must(t, expect.Locator(notice).ToContainText("bot:alice/test-runner"))
	must(t, expect.Locator(page.GetByTestId("agent-take")).ToBeVisible())

	for _, pg := range []struct{ user, path string }{{"alice", "/"}, {"ops", "/admin"}} {
		code, body := p.bearer(t, "", "GET", pg.path, "", "Tailscale-User-Login", pg.user)
		if code != 200 || !strings.Contains(body, "bot:alice/test-runner") {
			t.Errorf("%s's %s: %d, does not name bot:alice/test-runner", pg.user, pg.path, code)
		}
	}

	// Alice watches the agent type.
	waitFor(t, 2*time.Minute, "the desktop's screen to settle", func() bool {
		return strings.HasPrefix(resultText(tool(t, s, "wait_for_change", map[string]any{"desktop": c.Desktop, "timeout_ms": 3000})), "no change")
	})
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

	typeX := func() (string, bool) {
		res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "type_text", Arguments: map[string]any{"desktop": c.Desktop, "text": "x"}})
		if err != nil {
			t.Fatal(err)
		}
		return resultText(res), res.IsError
	}

	t.Run("TakeControl", func(t *testing.T) {
		must(t, page.GetByTestId("agent-take").Click())
		must(t, expect.Locator(page.GetByTestId("agent-state")).ToContainText("You took control"))
		screenshot(t, page, "took-control")
		if said, refused := typeX(); !refused || !strings.Contains(said, "alice took control") || !strings.Contains(said, "until they hand it back") {
			t.Errorf("the agent's input while alice holds control: refused %v, %q", refused, said)
		}
		if res := tool(t, s, "screenshot", map[string]any{"desktop": c.Desktop}); len(res.Content) == 0 {
			t.Error("no screenshot while alice has control")
		}
		must(t, page.GetByTestId("agent-hand-back").Click())
		must(t, expect.Locator(page.GetByTestId("agent-take")).ToBeVisible())
		if said, refused := typeX(); refused {
			t.Errorf("the agent's input after alice handed back: %q", said)
		}
	})

	t.Run("Stop", func(t *testing.T) {
		// A wait_for_change in flight when alice stops the agent ends
		// then, refused.
		inFlight := callInFlight(t, s, c.Desktop)
		must(t, page.GetByTestId("agent-stop").Click())
		select {
		case a := <-inFlight:
			if !a.refused || !strings.Contains(a.text, "alice stopped the agent's work") {
				t.Errorf("the call in flight when alice stopped the agent: refused %v, %q", a.refused, a.text)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the agent's wait_for_change went on 30 s after alice stopped it")
		}
		must(t, expect.Locator(page.GetByTestId("agent-state")).ToContainText("You stopped it"))
		for _, call := range []struct {
			name string
			args map[string]any
		}{
			{"screenshot", map[string]any{"desktop": c.Desktop}},
			{"type_text", map[string]any{"desktop": c.Desktop, "text": "x"}},
			{"claim_desktop", map[string]any{"pool": "local/demo"}},
			{"release_desktop", map[string]any{"desktop": c.Desktop}},
		} {
			if got := toolRefused(t, s, call.name, call.args); !strings.Contains(got, "alice stopped the agent's work") || !strings.Contains(got, "Let the agent go on") {
				t.Errorf("%s of the stopped agent said %q", call.name, got)
			}
		}
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		screenshotsAt(t, page, page.GetByTestId("agent-go-on"), "stopped")
		must(t, page.GetByTestId("agent-go-on").Click())
		must(t, expect.Locator(page.GetByTestId("agent-stop")).ToBeVisible())
		if res := tool(t, s, "screenshot", map[string]any{"desktop": c.Desktop}); len(res.Content) == 0 {
			t.Error("no screenshot after alice let the agent go on")
		}
	})

	t.Run("TypingTakesControl", func(t *testing.T) {
		must(t, page.Locator("#screen canvas").Click())
		var said string
		waitFor(t, time.Minute, "the agent's input suspended once alice typed", func() bool {
			must(t, page.Keyboard().Press("Shift"))
			var refused bool
			said, refused = typeX()
			return refused
		})
		if !strings.Contains(said, "alice took control") {
			t.Errorf("the suspended agent was told %q", said)
		}
		for _, size := range issueSizes[1:] {
			must(t, page.SetViewportSize(size.width, size.height))
			must(t, expect.Locator(page.GetByTestId("agent-take")).ToBeInViewport())
			screenshot(t, page, "agent-notice-"+size.name)
		}
		must(t, page.SetViewportSize(1280, 800))
	})

	// Alice opens the desktop in a second tab: what she does there shows
	// in the first at once, without a reload, and the other way round.
	t.Run("AnotherTab", func(t *testing.T) {
		member := strings.TrimPrefix(c.Desktop, "local/")
		other := uxPage(t, b, 1280, 800, false)
		signIn(t, other, p, "alice", "/desktops/local/"+member)
		must(t, expect.Locator(other.GetByTestId("agent-notice")).ToContainText("bot:alice/test-runner"))
		must(t, other.GetByTestId("agent-stop").Click())
		must(t, expect.Locator(page.GetByTestId("agent-state")).ToContainText("You stopped it"))
		must(t, expect.Locator(page.GetByTestId("agent-go-on")).ToBeVisible())
		screenshot(t, page, "stopped-in-another-tab")
		must(t, page.GetByTestId("agent-go-on").Click())
		must(t, expect.Locator(other.GetByTestId("agent-stop")).ToBeVisible())
		must(t, expect.Locator(other.GetByTestId("agent-go-on")).ToBeHidden())
		must(t, other.GetByTestId("agent-take").Click())
		must(t, expect.Locator(page.GetByTestId("agent-state")).ToContainText("You took control"))
		must(t, expect.Locator(page.GetByTestId("agent-hand-back")).ToBeVisible())
	})

	t.Run("HomeAndDashboard", func(t *testing.T) { oversightOnHomeAndDashboard(t, p, b, page, s, tok, c.Desktop) })
}
