package e2e

import (
	"strings"
	"testing"
)

// oversightRefusals: who may take control of an agent or stop it. Alice's
// agent (session s) works in desk, a desktop of local/sealed. Bob
// (another user), carol (invited to watch it) and alice's own token
// (the agent lifting its own stop) are refused; so are a GET (no state
// change on GET) and a POST from another site, with or without
// "revoke the token too"; bob's stop of his own desktop naming alice's
// token revokes nothing (the token revoked is the one the claim names).
// Throughout, the agent works on; alice herself then stops it and lets
// it go on.
func oversightRefusals(t *testing.T, p *Portal, agent func(name string, args map[string]any) (string, bool), token, tokenID, desk string) {
	member := strings.TrimPrefix(desk, "local/")
	const revoke = `{"revokeToken": true}`
	base := "/api/vdi/desktops/" + desk + "/oversight/"
	if code := p.APIBody(t, "alice", "POST", "/api/vdi/desktops/"+desk+"/shares", `{"user": "carol", "control": false}`, nil); code != 201 {
		t.Fatalf("alice invites carol to watch %s: %d", member, code)
	}
	for _, row := range []struct {
		who, method, action string
		hdr                 []string
		tok                 string
		want                int
		body                string
	}{
		{"bob, another user", "POST", "stop", []string{"Tailscale-User-Login", "bob"}, "", 403, ""},
		{"bob, another user", "POST", "take", []string{"Tailscale-User-Login", "bob"}, "", 403, ""},
		{"carol, invited to watch", "POST", "stop", []string{"Tailscale-User-Login", "carol"}, "", 403, ""},
		{"carol, invited to watch", "POST", "take", []string{"Tailscale-User-Login", "carol"}, "", 403, ""},
		{"alice by GET", "GET", "stop", []string{"Tailscale-User-Login", "alice"}, "", 404, ""},
		{"alice from another site", "POST", "stop", []string{"Tailscale-User-Login", "alice", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, "", 403, ""},
		{"alice's own token (the agent)", "POST", "take", nil, token, 403, ""},
		{"bob, revoking alice's token", "POST", "stop", []string{"Tailscale-User-Login", "bob"}, "", 403, revoke},
		{"carol, revoking alice's token", "POST", "stop", []string{"Tailscale-User-Login", "carol"}, "", 403, revoke},
		{"alice from another site, revoking", "POST", "stop", []string{"Tailscale-User-Login", "alice", "Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, "", 403, revoke},
		{"alice's own token, revoking itself", "POST", "stop", nil, token, 403, revoke},
		{"alice revoking at take", "POST", "take", []string{"Tailscale-User-Login", "alice"}, "", 400, revoke},
	} {
		code, body := p.bearer(t, row.tok, row.method, base+row.action, row.body, row.hdr...)
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
	// Bob stops "his agent" on his own desktop, naming alice's token.
	var bobs desktop
	if code := p.APIBody(t, "bob", "POST", "/api/vdi/pools/local/demo/claim", "", &bobs); code != 200 {
		t.Fatalf("bob claims a demo desktop: %d", code)
	}
	bobBase := "/api/vdi/desktops/local/" + bobs.Name + "/oversight/stop"
	if code, body := p.bearer(t, "", "POST", bobBase, `{"revokeToken": true, "token": "`+tokenID+`", "id": "`+tokenID+`"}`, "Tailscale-User-Login", "bob"); code != 409 {
		t.Errorf("bob's stop of his own desktop, revoking alice's token by id: %d %s; want 409 (his claim names no token)", code, body)
	}
	if said, refused := agent("screenshot", map[string]any{"desktop": desk}); refused {
		t.Errorf("alice's agent after bob's stop naming her token: %q", said)
	}
	p.APIBody(t, "bob", "POST", "/api/vdi/desktops/local/"+bobs.Name+"/release", "", nil)

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
