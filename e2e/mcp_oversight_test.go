package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestMCP_Oversight: a desktop an agent works in says so on its
// holder's home page and on the dashboard; when alice types in her own
// console she takes control, and the agent's next input says so while
// its screenshots go on.
func TestMCP_Oversight(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
	tok := mustToken(t, p, "alice", `{"name": "test-runner", "pools": ["local/demo"]}`)
	s := mustMCP(t, p, tok.Token)
	var c struct{ Desktop string }
	jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/demo"})), &c)
	member := strings.TrimPrefix(c.Desktop, "local/")
	tool(t, s, "move", map[string]any{"desktop": c.Desktop, "x": 5, "y": 5})

	for _, page := range []struct{ user, path string }{{"alice", "/"}, {"ops", "/admin"}} {
		code, body := p.bearer(t, "", "GET", page.path, "", "Tailscale-User-Login", page.user)
		if code != 200 || !strings.Contains(body, "bot:alice/test-runner") {
			t.Errorf("%s's %s: %d, does not name bot:alice/test-runner", page.user, page.path, code)
		}
	}

	ws, _, err := dialWS(p, "alice", "/ws/vnc/local/"+member, p.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	send := rfbHandshake(t, ws)
	var said string
	waitFor(t, time.Minute, "the agent's input suspended once alice typed", func() bool {
		send([]byte{4, 1, 0, 0, 0, 0, 0xff, 0xe1}) // shift down
		send([]byte{4, 0, 0, 0, 0, 0, 0xff, 0xe1}) // and up
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
}
