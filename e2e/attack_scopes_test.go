package e2e

import (
	"context"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// scopeRefusals: a token does only what its scopes say, over MCP, the
// agent's JSON routes and the rest of the API alike. Alice holds desk
// (a desktop of local/sealed her agent claimed); a see-only token neither
// acts in it, nor claims, starts or releases, nor brings files in; an
// act-only token neither looks at it nor reads its state. Each refusal
// names the missing scope, and the desktop is still alice's after.
func scopeRefusals(t *testing.T, p *Portal, desk string) {
	see := mustToken(t, p, "alice", `{"name": "see-only", "pools": ["local/sealed"], "scopes": ["see"]}`)
	act := mustToken(t, p, "alice", `{"name": "act-only", "pools": ["local/sealed"], "scopes": ["act"]}`)
	if strings.Join(see.Scopes, ",") != "see" {
		t.Fatalf("the see-only token has scopes %v", see.Scopes)
	}
	seer, actor := mustMCP(t, p, see.Token), mustMCP(t, p, act.Token)
	tool(t, seer, "screenshot", map[string]any{"desktop": desk}) // what it may do, it does
	for _, c := range []struct {
		s          *mcp.ClientSession
		name, lack string
		args       map[string]any
	}{
		{seer, "type_text", "act", map[string]any{"desktop": desk, "text": "rm -rf ~\n"}},
		{seer, "click", "act", map[string]any{"desktop": desk, "x": 10, "y": 10}},
		{seer, "write_clipboard", "act", map[string]any{"desktop": desk, "text": "x"}},
		{seer, "claim_desktop", "claim", map[string]any{"pool": "local/sealed"}},
		{seer, "release_desktop", "claim", map[string]any{"desktop": desk}},
		{actor, "screenshot", "see", map[string]any{"desktop": desk}},
		{actor, "wait_for_change", "see", map[string]any{"desktop": desk, "timeout_ms": 10}},
		{actor, "list_pools", "see", nil},
	} {
		if got := toolRefused(t, c.s, c.name, c.args); !strings.Contains(got, `lacks the "`+c.lack+`" scope`) {
			t.Errorf("%s over MCP said %q; want the %s scope named", c.name, got, c.lack)
		}
	}
	if r, err := actor.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "corral://desktops"}); err == nil || !strings.Contains(err.Error(), `"see" scope`) {
		t.Errorf("an act-only token read the desktops resource: %+v, %v", r, err)
	}
	api := "/api/vdi/desktops/" + desk
	for _, c := range []struct {
		name, token, method, path, body, lack string
	}{
		{"SeeTypes", see.Token, "POST", api + "/agent/type_text", `{"text": "x"}`, "act"},
		{"SeeUploads", see.Token, "PUT", api + "/files/a.txt", "x", "act"},
		{"SeeClaims", see.Token, "POST", "/api/vdi/pools/local/sealed/claim", "", "claim"},
		{"SeeReleases", see.Token, "POST", api + "/release", "", "claim"},
		{"SeeStops", see.Token, "POST", api + "/stop", "", "claim"},
		{"ActLooks", act.Token, "POST", api + "/agent/screenshot", "", "see"},
		{"ActDownloads", act.Token, "GET", api + "/files", "", "see"},
	} {
		code, got := p.bearer(t, c.token, c.method, c.path, c.body)
		if code != 403 || !strings.Contains(got, `lacks the \"`+c.lack+`\" scope`) {
			t.Errorf("%s: %d %.300s; want 403 naming the %s scope", c.name, code, got, c.lack)
		}
	}
	var mine []desktop
	if p.API(t, "alice", "GET", "/api/vdi/desktops", &mine); !strings.Contains(strings.Join(names(mine), ","), strings.TrimPrefix(desk, "local/")) {
		t.Errorf("alice lost %s to a refused token: she holds %+v", desk, mine)
	}
}

func names(ds []desktop) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name)
	}
	return out
}
