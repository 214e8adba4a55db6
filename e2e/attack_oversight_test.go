package e2e

import (
	"strings"
	"testing"
)

// oversightRefusals: who may take control of an agent or stop it. Alice's
// agent (session s) works in desk, a desktop of local/sealed. Bob
// (another user), carol (invited to watch it) and alice's own token
// (the agent lifting its own stop) are refused; so are a GET (no state
// change on GET) and a POST from another site. Throughout, the agent
// works on; alice herself then stops it and lets it go on.
func oversightRefusals(t *testing.T, p *Portal, agent func(name string, args map[string]any) (string, bool), token, desk string) {
	member := strings.TrimPrefix(desk, "local/")
	base := "/api/vdi/desktops/" + desk + "/oversight/"
	if code := p.APIBody(t, "alice", "POST", "/api/vdi/desktops/"+desk+"/shares", `{"user": "carol", "control": false}`, nil); code != 201 {
		t.Fatalf("alice invites carol to watch %s: %d", member, code)
	}
	for _, row := range []struct {
		who, method, action string
		hdr                 []string
		tok                 string
		want                int
	}{
		{"bob, another user", "POST", "stop", []string{"Tailscale-User-Login", "bob"}, "", 403},
		{"bob, another user", "POST", "take", []string{"Tailscale-User-Login", "bob"}, "", 403},
		{"carol, invited to watch", "POST", "stop", []string{"Tailscale-User-Login", "carol"}, "", 403},
		{"carol, invited to watch", "POST", "take", []string{"Tailscale-User-Login", "carol"}, "", 403},
		{"alice by GET", "GET", "stop", []string{"Tailscale-User-Login", "alice"}, "", 404},
		{"alice from another site", "POST", "stop", []string{"Tailscale-User-Login", "alice", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, "", 403},
		{"alice's own token (the agent)", "POST", "take", nil, token, 403},
	} {
		code, body := p.bearer(t, row.tok, row.method, base+row.action, "", row.hdr...)
		if code != row.want {
			t.Errorf("%s: %s %s: %d %s; want %d", row.who, row.method, row.action, code, body, row.want)
		}
		if said, refused := agent("screenshot", map[string]any{"desktop": desk}); refused {
			t.Errorf("after %s's %s %s the agent is refused: %q", row.who, row.method, row.action, said)
		}
		if said, refused := agent("move", map[string]any{"desktop": desk, "x": 1, "y": 1}); refused && !strings.Contains(said, "rate limit") {
			t.Errorf("after %s's %s %s the agent's input is refused: %q", row.who, row.method, row.action, said)
		}
		if code < 300 { // the next row starts where alice left it
			p.APIBody(t, "alice", "POST", base+"go-on", "", nil)
			p.APIBody(t, "alice", "POST", base+"hand-back", "", nil)
		}
	}
	// Alice stops her agent; it cannot let itself go on; she can.
	if code := p.APIBody(t, "alice", "POST", base+"stop", "", nil); code != 200 {
		t.Fatalf("alice stops her agent: %d", code)
	}
	if code, body := p.bearer(t, token, "POST", base+"go-on", ""); code != 403 {
		t.Errorf("the stopped agent lets itself go on with its token: %d %s; want 403", code, body)
	}
	if said, refused := agent("screenshot", map[string]any{"desktop": desk}); !refused || !strings.Contains(said, "alice stopped") {
		t.Errorf("the stopped agent's screenshot: refused %v, %q", refused, said)
	}
	if code := p.APIBody(t, "alice", "POST", base+"go-on", "", nil); code != 200 {
		t.Fatalf("alice lets her agent go on: %d", code)
	}
	if said, refused := agent("screenshot", map[string]any{"desktop": desk}); refused {
		t.Errorf("the agent after alice let it go on: %q", said)
	}
}
