package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"image"
	"image/png"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// bearerTransport adds a token to every request of an MCP client.
type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// mustMCP connects the MCP SDK's own client to p's /mcp with token.
func mustMCP(tb testing.TB, p *Portal, token string) *mcp.ClientSession {
	tb.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "e2e-agent", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: p.URL + "/mcp",
		HTTPClient: &http.Client{Transport: bearerTransport{token}}, DisableStandaloneSSE: true}, nil)
	if err != nil {
		tb.Fatalf("connect to /mcp: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// tool calls a tool and fails tb on an error or a tool error; it returns
// the result.
func tool(tb testing.TB, s *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	tb.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	if res.IsError {
		tb.Fatalf("%s: tool error %s", name, resultText(res))
	}
	return res
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// TestMCP_AgentWorksInADesktop: an agent with nothing but the MCP SDK's
// client and alice's token lists pools, claims a desktop, sees it (full
// size and scaled), waits for it to settle, types a command into its
// terminal that writes a file, which the Files API then serves, sees the
// screen change and releases the desktop; its calls are in the audit
// log as bot:alice/test-runner. No person's console is ever open: the
// agent's work alone keeps the desktop from the disconnect grace (10 s
// here), and once the agent stops calling, the desktop is reclaimed.
func TestMCP_AgentWorksInADesktop(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops",
		"CORRAL_VDI_DISCONNECT_GRACE="+agentGrace.String(), "CORRAL_VDI_AGENT_SEAT_IDLE="+agentSeatIdle.String(), "CORRAL_VDI_RECLAIM_INTERVAL=1s")
	tok := mustToken(t, p, "alice", `{"name": "test-runner", "pools": ["local/demo"], "expires": "1h"}`)
	s := mustMCP(t, p, tok.Token)

	tools, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	for _, want := range []string{"list_pools", "claim_desktop", "screenshot", "move", "click", "double_click", "drag", "scroll", "type_text", "press_keys", "read_clipboard", "write_clipboard", "wait_for_change", "release_desktop"} {
		if !strings.Contains(" "+strings.Join(names, " ")+" ", " "+want+" ") {
			t.Errorf("tools %v lack %s", names, want)
		}
	}
	if got := resultText(tool(t, s, "list_pools", nil)); !strings.Contains(got, `"local/demo"`) {
		t.Fatalf("list_pools = %s; want local/demo", got)
	}
	var claimed struct {
		Desktop       string
		Width, Height int
	}
	claimedAt := time.Now()
	json.Unmarshal([]byte(resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/demo"}))), &claimed)
	if !strings.HasPrefix(claimed.Desktop, "local/demo-") || claimed.Width < 640 || claimed.Height < 400 {
		t.Fatalf("claim_desktop = %+v; want a demo desktop and its screen size", claimed)
	}
	desk := map[string]any{"desktop": claimed.Desktop}
	agentResources(t, s, claimed.Desktop)

	var img *mcp.ImageContent
	for _, c := range tool(t, s, "screenshot", desk).Content {
		if i, ok := c.(*mcp.ImageContent); ok {
			img = i
		}
	}
	if img == nil || img.MIMEType != "image/png" {
		t.Fatal("screenshot sent no PNG")
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(img.Data))
	if err != nil || cfg.Width != claimed.Width || cfg.Height != claimed.Height {
		t.Fatalf("screenshot is %dx%d (%v); want %dx%d", cfg.Width, cfg.Height, err, claimed.Width, claimed.Height)
	}
	small := tool(t, s, "screenshot", map[string]any{"desktop": claimed.Desktop, "width": 320}).Content[0].(*mcp.ImageContent)
	if cfg, _ := png.DecodeConfig(bytes.NewReader(small.Data)); cfg.Width != 320 {
		t.Errorf("scaled screenshot is %d wide; want 320", cfg.Width)
	}

	// As an agent would, wait for the fresh desktop to settle (its
	// window manager and terminal start after its screen answers).
	waitFor(t, 2*time.Minute, "the desktop's screen to settle", func() bool {
		return strings.HasPrefix(resultText(tool(t, s, "wait_for_change", map[string]any{"desktop": claimed.Desktop, "timeout_ms": 3000})), "no change")
	})
	agentJSONCrop(t, p, s, tok.Token, claimed.Desktop)
	// The local desktop's xterm sits at +40+40: a click focuses it. A
	// fresh home has no Downloads folder yet.
	tool(t, s, "click", map[string]any{"desktop": claimed.Desktop, "x": 300, "y": 200})
	tool(t, s, "screenshot", desk)
	tool(t, s, "type_text", map[string]any{"desktop": claimed.Desktop, "text": "mkdir -p ~/Downloads; echo hello-agent > ~/Downloads/a.txt"})
	if got := resultText(tool(t, s, "wait_for_change", map[string]any{"desktop": claimed.Desktop, "timeout_ms": 30000})); got != "changed" {
		t.Errorf("wait_for_change after typing = %q; want changed", got)
	}
	tool(t, s, "press_keys", map[string]any{"desktop": claimed.Desktop, "keys": []string{"Enter"}})
	var body string
	waitFor(t, time.Minute, "a.txt in the desktop's Downloads, through the Files API", func() bool {
		var code int
		code, body = p.bearer(t, tok.Token, "GET", "/api/vdi/desktops/"+claimed.Desktop+"/files/a.txt", "")
		return code == 200
	})
	if body != "hello-agent\n" {
		t.Errorf("a.txt = %q; want hello-agent", body)
	}

	agentKeepsItsDesktop(t, p, s, claimed.Desktop, claimedAt)

	tool(t, s, "release_desktop", desk)
	var mine []desktop
	if p.API(t, "alice", "GET", "/api/vdi/desktops", &mine); len(mine) != 0 {
		t.Errorf("alice still holds %+v after release_desktop", mine)
	}
	t.Run("StoppedAgentLetsItGo", func(t *testing.T) { agentStopsCalling(t, p, s) })
	var audit []struct{ Action, Detail string }
	p.API(t, "ops", "GET", "/api/vdi/history/audit", &audit)
	var typed bool
	for _, a := range audit {
		typed = typed || a.Action == "agent-type-text" && strings.Contains(a.Detail, "bot:alice/test-runner") && strings.Contains(a.Detail, "hello-agent")
	}
	if !typed {
		t.Errorf("no agent-type-text row of bot:alice/test-runner in the audit log: %+v", audit)
	}
}

// agentJSONCrop checks the seat's JSON routes against its MCP tools: a
// crop through POST .../agent/screenshot is that part of the MCP
// screenshot, pixel for pixel (tried a few times, as the desktop may still
// draw between the two), and scales as asked; another tool answers JSON.
func agentJSONCrop(t *testing.T, p *Portal, s *mcp.ClientSession, token, desk string) {
	t.Helper()
	path := "/api/vdi/desktops/" + desk + "/agent/"
	diff := -1
	for try := 0; try < 5 && diff != 0; try++ {
		var full image.Image
		for _, c := range tool(t, s, "screenshot", map[string]any{"desktop": desk}).Content {
			if i, ok := c.(*mcp.ImageContent); ok {
				full, _ = png.Decode(bytes.NewReader(i.Data))
			}
		}
		if full == nil {
			t.Fatal("the MCP screenshot sent no PNG")
		}
		code, body := p.bearer(t, token, "POST", path+"screenshot", `{"crop": {"x": 30, "y": 20, "width": 400, "height": 300}}`)
		part, err := png.Decode(strings.NewReader(body))
		if code != 200 || err != nil {
			t.Fatalf("JSON screenshot with a crop: %d %v %.200s", code, err, body)
		}
		if b := part.Bounds(); b.Dx() != 400 || b.Dy() != 300 {
			t.Fatalf("the crop is %v; want 400x300", b)
		}
		diff = 0
		for y := range 300 {
			for x := range 400 {
				r1, g1, b1, _ := part.At(part.Bounds().Min.X+x, part.Bounds().Min.Y+y).RGBA()
				r2, g2, b2, _ := full.At(30+x, 20+y).RGBA()
				if r1 != r2 || g1 != g2 || b1 != b2 {
					diff++
				}
			}
		}
		t.Logf("crop try %d: %d pixels differ from the full screenshot", try+1, diff)
	}
	if diff != 0 {
		t.Errorf("%d pixels of the crop differ from the same part of the full screenshot", diff)
	}
	code, body := p.bearer(t, token, "POST", path+"screenshot", `{"crop": {"x": 30, "y": 20, "width": 400, "height": 300}, "width": 200}`)
	if cfg, err := png.DecodeConfig(strings.NewReader(body)); code != 200 || err != nil || cfg.Width != 200 || cfg.Height != 150 {
		t.Errorf("JSON screenshot cropped and scaled: %d %v %dx%d; want 200x150", code, err, cfg.Width, cfg.Height)
	}
	code, body = p.bearer(t, token, "POST", path+"wait_for_change", `{"timeout_ms": 200}`)
	var res struct{ Result string }
	if json.Unmarshal([]byte(body), &res); code != 200 || !strings.HasPrefix(res.Result, "no change") && res.Result != "changed" {
		t.Errorf("JSON wait_for_change: %d %s; want 200 and its answer", code, body)
	}
}

// agentResources reads the seat's resources: the desktops the token's
// user holds, and the one just claimed, with its holder and agent.
func agentResources(t *testing.T, s *mcp.ClientSession, desk string) {
	t.Helper()
	res, err := s.ListResources(context.Background(), nil)
	if err != nil || len(res.Resources) == 0 || res.Resources[0].URI != "corral://desktops" {
		t.Fatalf("resources/list: %v %+v; want corral://desktops", err, res)
	}
	read := func(uri string) []byte {
		r, err := s.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: uri})
		if err != nil || len(r.Contents) != 1 {
			t.Fatalf("read %s: %v %+v", uri, err, r)
		}
		return []byte(r.Contents[0].Text)
	}
	var all []struct{ Namespace, Name, Holder string }
	if err := json.Unmarshal(read("corral://desktops"), &all); err != nil || len(all) != 1 || all[0].Namespace+"/"+all[0].Name != desk {
		t.Errorf("corral://desktops = %+v (%v); want just %s", all, err, desk)
	}
	var one struct{ Holder, Agent, Power string }
	if err := json.Unmarshal(read("corral://desktops/"+desk), &one); err != nil || one.Holder != "alice" || one.Agent != "bot:alice/test-runner" || one.Power == "" {
		t.Errorf("corral://desktops/%s = %+v (%v); want alice's, worked by bot:alice/test-runner", desk, one, err)
	}
}
