package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolRefused calls a tool that must be refused and returns its words.
func toolRefused(tb testing.TB, s *mcp.ClientSession, name string, args map[string]any) string {
	tb.Helper()
	res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return err.Error()
	}
	if !res.IsError {
		tb.Fatalf("%s %v was served: %s", name, args, resultText(res))
	}
	return resultText(res)
}

// TestAttack_MCP: what an agent (or a page of another site) tries at
// /mcp beyond its token: no token, another pool, a desktop shared with
// its user, a clipboard its pool keeps closed, an action its token's
// scopes leave out, a flood of input, and a request from another site;
// and who may take control of an agent or stop it.
func TestAttack_MCP(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_ADMINS=ops")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "sealed", "size": 1, "policy": {"clipboard": "to-desktop"}}`, nil); code != 201 {
		t.Fatalf("create pool sealed: %d", code)
	}
	tok := mustToken(t, p, "alice", `{"name": "runner", "pools": ["local/sealed"]}`)
	s := mustMCP(t, p, tok.Token)

	t.Run("Conformance", func(t *testing.T) {
		mcpConformance(t, p, tok.Token)
		mcpInspector(t, p, tok.Token, "local/sealed")
	})
	t.Run("NoToken", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
		for _, hdr := range [][]string{
			{"Tailscale-User-Login", "alice"},
			{"Cookie", "corral_vdi_session=" + tok.Token},
		} {
			code, got := p.bearer(t, "", "POST", "/mcp?access_token="+tok.Token, body, append(hdr, "Accept", "application/json, text/event-stream")...)
			if code != 401 || !strings.Contains(got, "personal access token") {
				t.Errorf("/mcp with %s: %d %s; want 401", hdr[0], code, got)
			}
		}
	})
	t.Run("CrossSite", func(t *testing.T) {
		code, got := p.bearer(t, tok.Token, "POST", "/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`,
			"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Accept", "application/json, text/event-stream")
		if code != 403 {
			t.Errorf("/mcp from another site: %d %s; want 403", code, got)
		}
	})
	t.Run("OtherPool", func(t *testing.T) {
		if got := toolRefused(t, s, "claim_desktop", map[string]any{"pool": "local/demo"}); !strings.Contains(got, "does not reach pool local/demo") {
			t.Errorf("claim from another pool said %q", got)
		}
		var all []desktop
		if p.API(t, "ops", "GET", "/api/vdi/desktops?all=1", &all); strings.Contains(strings.Join(holders(all), ","), "alice") {
			t.Errorf("alice holds a desktop after the refused claim: %+v", all)
		}
	})
	t.Run("SharedDesktop", func(t *testing.T) {
		d := mustClaim(t, p, "bob", "demo")
		if code := p.APIBody(t, "bob", "POST", "/api/vdi/desktops/local/"+d.Name+"/shares", `{"user": "alice", "control": false}`, nil); code != 201 {
			t.Fatalf("bob invites alice: %d", code)
		}
		wide := mustToken(t, p, "alice", `{"name": "wide", "pools": ["*"]}`)
		ws := mustMCP(t, p, wide.Token)
		for name, args := range map[string]map[string]any{
			"screenshot": {"desktop": "local/" + d.Name},
			"type_text":  {"desktop": "local/" + d.Name, "text": "x"},
		} {
			if got := toolRefused(t, ws, name, args); !strings.Contains(got, "not yours") {
				t.Errorf("%s on bob's desktop shared with alice said %q", name, got)
			}
		}
		if r, err := ws.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "corral://desktops/local/" + d.Name}); err == nil {
			t.Errorf("alice's agent read bob's desktop as a resource: %+v", r.Contents)
		}
	})
	t.Run("AgentAPI", func(t *testing.T) {
		agentAPIRefusals(t, p, tok.Token)
	})
	t.Run("ClipboardClosed", func(t *testing.T) {
		var c struct{ Desktop string }
		jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/sealed"})), &c)
		if got := toolRefused(t, s, "read_clipboard", map[string]any{"desktop": c.Desktop}); !strings.Contains(got, "lets no text out of") {
			t.Errorf("read_clipboard on a to-desktop pool said %q", got)
		}
		tool(t, s, "write_clipboard", map[string]any{"desktop": c.Desktop, "text": "in"})
	})
	t.Run("Scopes", func(t *testing.T) {
		var c struct{ Desktop string }
		jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/sealed"})), &c)
		scopeRefusals(t, p, c.Desktop)
	})
	t.Run("Oversight", func(t *testing.T) {
		var c struct{ Desktop string }
		jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/sealed"})), &c)
		oversightRefusals(t, p, func(name string, args map[string]any) (string, bool) {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				t.Fatal(err)
			}
			return resultText(res), res.IsError
		}, tok.Token, tok.ID, c.Desktop)
	})
	t.Run("InputFlood", func(t *testing.T) {
		var c struct{ Desktop string }
		jsonInto(t, resultText(tool(t, s, "claim_desktop", map[string]any{"pool": "local/sealed"})), &c)
		var refused string
		for i := 0; i < 500 && refused == ""; i++ {
			res, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "move", Arguments: map[string]any{"desktop": c.Desktop, "x": i % 100, "y": 10}})
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError {
				refused = resultText(res)
			}
		}
		if !strings.Contains(refused, "rate limit") {
			t.Errorf("500 moves at once were all served (last refusal %q); want a rate limit", refused)
		}
	})
	t.Run("AgentCap", func(t *testing.T) {
		// Alice's agents work in two desktops by now (demo through the
		// JSON API, sealed): the default cap.
		if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "third", "size": 1}`, nil); code != 201 {
			t.Fatalf("create pool third: %d", code)
		}
		wide := mustMCP(t, p, mustToken(t, p, "alice", `{"name": "capped", "pools": ["*"]}`).Token)
		if got := toolRefused(t, wide, "claim_desktop", map[string]any{"pool": "local/third"}); !strings.Contains(got, "agents already work in 2 desktops") {
			t.Errorf("a third agent desktop said %q; want the cap", got)
		}
		var mine []desktop
		if p.API(t, "alice", "GET", "/api/vdi/desktops", &mine); strings.Contains(fmt.Sprint(mine), "third") {
			t.Errorf("alice holds a desktop of third after the refusal: %+v", mine)
		}
		// A person is not capped: alice claims it herself.
		mustClaim(t, p, "alice", "third")
	})
}

func holders(ds []desktop) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Holder)
	}
	return out
}

// jsonInto decodes a tool's JSON text into out.
func jsonInto(tb testing.TB, text string, out any) {
	tb.Helper()
	if err := json.Unmarshal([]byte(text), out); err != nil {
		tb.Fatalf("tool answered %q: %v", text, err)
	}
}

// agentAPIRefusals: the JSON agent routes refuse what /mcp refuses — a
// browser's identity without a token, another site, another user's
// desktop shared view-only, a pool the token does not reach, a tool that
// is not a desktop's — and have the seat's rate limit.
func agentAPIRefusals(t *testing.T, p *Portal, runner string) {
	d := mustClaim(t, p, "bob", "demo")
	if code := p.APIBody(t, "bob", "POST", "/api/vdi/desktops/local/"+d.Name+"/shares", `{"user": "alice", "control": false}`, nil); code != 201 {
		t.Fatalf("bob invites alice: %d", code)
	}
	bobs := "/api/vdi/desktops/local/" + d.Name + "/agent/"
	wide := mustToken(t, p, "alice", `{"name": "wide-json", "pools": ["*"]}`)
	for _, c := range []struct {
		name, token, path, body string
		hdr                     []string
		code                    int
		says                    string
	}{
		{"IdentityProxyNoToken", "", bobs + "screenshot", "", []string{"Tailscale-User-Login", "alice"}, 401, "personal access token"},
		{"CookieNoToken", "", bobs + "screenshot", "", []string{"Cookie", "corral_vdi_session=" + wide.Token}, 401, "personal access token"},
		{"CrossSite", wide.Token, bobs + "type_text", `{"text": "x"}`, []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, ""},
		{"SharedViewOnly", wide.Token, bobs + "type_text", `{"text": "x"}`, nil, 403, "not yours"},
		{"SharedViewOnlyScreenshot", wide.Token, bobs + "screenshot", "", nil, 403, "not yours"},
		{"OtherPool", runner, bobs + "screenshot", "", nil, 403, ""},
		{"NotADesktopTool", wide.Token, bobs + "claim_desktop", `{"pool": "local/demo"}`, nil, 404, "No agent action"},
		{"DesktopInTheBody", wide.Token, "/api/vdi/desktops/local/nothing-here/agent/screenshot", `{"desktop": "local/` + d.Name + `"}`, nil, 404, ""},
		{"BadJSON", wide.Token, bobs + "move", `{"x": "left"}`, nil, 400, "not valid JSON"},
	} {
		code, got := p.bearer(t, c.token, "POST", c.path, c.body, c.hdr...)
		if code != c.code || !strings.Contains(got, c.says) {
			t.Errorf("%s: %d %.300s; want %d saying %q", c.name, code, got, c.code, c.says)
		}
	}
	// Alice's own desktop, for the flood.
	var mine desktop
	if code := p.APIBody(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", "", &mine); code != 200 {
		t.Fatalf("alice claims: %d", code)
	}
	code := 0
	for i := 0; i < 500 && code != 429; i++ {
		code, _ = p.bearer(t, wide.Token, "POST", "/api/vdi/desktops/local/"+mine.Name+"/agent/move", fmt.Sprintf(`{"x": %d, "y": 10}`, i%100))
	}
	if code != 429 {
		t.Errorf("500 JSON moves at once: last answer %d; want 429 from the token's rate limit", code)
	}
}
