package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// token is the JSON shape of a personal access token.
type token struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	User     string   `json:"user"`
	Pools    []string `json:"pools"`
	Scopes   []string `json:"scopes"`
	Expires  string   `json:"expires"`
	LastUsed string   `json:"lastUsed"`
	Token    string   `json:"token"`
}

// mustToken makes a token as user with the API and returns it.
func mustToken(tb testing.TB, p *Portal, user, body string) token {
	tb.Helper()
	var t token
	if code := p.APIBody(tb, user, "POST", "/api/vdi/tokens", body, &t); code != 201 || t.Token == "" {
		tb.Fatalf("%s makes token %s: %d %+v", user, body, code, t)
	}
	return t
}

// bearer calls the portal with a token in the Authorization header (and
// whatever headers hdr adds) and returns the status and the body.
func (p *Portal) bearer(tb testing.TB, tok, method, path, body string, hdr ...string) (int, string) {
	tb.Helper()
	req, err := http.NewRequestWithContext(context.Background(), method, p.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestTokens_AgentActsAsUser: alice makes a token for pool demo; with it
// alone an agent lists pools (demo only), claims a desktop as alice and
// sees it; the token is listed with its last use and never its secret; the
// CLI makes, lists and revokes a service user's token.
func TestTokens_AgentActsAsUser(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_ADMINS=ops")
	if code := p.APIBody(t, "ops", "POST", "/api/vdi/pools", `{"name": "other", "size": 1}`, nil); code != 201 {
		t.Fatalf("create pool other: %d", code)
	}
	tok := mustToken(t, p, "alice", `{"name": "test-runner", "pools": ["local/demo"], "expires": "720h"}`)
	if !strings.HasPrefix(tok.Token, "cvdi_") || tok.Name != "test-runner" || strings.Join(tok.Pools, ",") != "local/demo" || tok.Expires == "" {
		t.Fatalf("token = %+v; want cvdi_…, test-runner, local/demo, an expiry", tok)
	}

	code, body := p.bearer(t, tok.Token, "GET", "/api/vdi/pools", "")
	var pools []pool
	json.Unmarshal([]byte(body), &pools)
	if code != 200 || len(pools) != 1 || pools[0].Name != "demo" {
		t.Fatalf("pools with the token: %d %s; want demo only", code, body)
	}
	code, body = p.bearer(t, tok.Token, "POST", "/api/vdi/pools/local/demo/claim", "")
	var d desktop
	json.Unmarshal([]byte(body), &d)
	if code != 200 || d.Holder != "alice" {
		t.Fatalf("claim with the token: %d %s; want 200 held by alice", code, body)
	}
	var mine []desktop
	if code := p.API(t, "alice", "GET", "/api/vdi/desktops", &mine); code != 200 || len(mine) != 1 || mine[0].Name != d.Name {
		t.Fatalf("alice's desktops: %d %+v; want %s", code, mine, d.Name)
	}

	var list []token
	if code := p.API(t, "alice", "GET", "/api/vdi/tokens", &list); code != 200 || len(list) != 1 {
		t.Fatalf("alice's tokens: %d %+v", code, list)
	}
	if list[0].Token != "" || list[0].LastUsed == "" || list[0].ID != tok.ID {
		t.Errorf("listed token = %+v; want no secret, a last use, id %s", list[0], tok.ID)
	}
	var bobs []token
	if p.API(t, "bob", "GET", "/api/vdi/tokens", &bobs); len(bobs) != 0 {
		t.Errorf("bob sees tokens %+v; want none", bobs)
	}
	if code := p.API(t, "bob", "DELETE", "/api/vdi/tokens/"+tok.ID, nil); code != 404 {
		t.Errorf("bob revokes alice's token: %d; want 404", code)
	}

	out := p.mustCLI(t, "token", "create", "nightly", "-user", "ci-bot", "-pools", "local/other", "-scopes", "see", "-expires", "24h")
	secret := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	if code, body := p.bearer(t, secret, "GET", "/api/vdi/pools", ""); code != 200 || !strings.Contains(body, `"other"`) || strings.Contains(body, `"demo"`) {
		t.Fatalf("ci-bot's pools with the CLI's token %q: %d %s; want other only", secret, code, body)
	}
	listed := p.mustCLI(t, "token", "list")
	var row []string
	for _, line := range strings.Split(listed, "\n") {
		if strings.Contains(line, "nightly") {
			row = strings.Fields(line)
		}
	}
	if len(row) < 5 || row[1] != "ci-bot" || row[4] != "see" {
		t.Fatalf("token list:\n%s\nwant a row of ci-bot's nightly, scopes see", listed)
	}
	p.mustCLI(t, "token", "revoke", row[0])
	if code, _ := p.bearer(t, secret, "GET", "/api/vdi/pools", ""); code != 401 {
		t.Errorf("the revoked token: %d; want 401", code)
	}
	var made, revoked int
	audited := eventually(time.Minute, func() bool { // the audit log writes behind
		var audit []struct{ Action string }
		p.API(t, "ops", "GET", "/api/vdi/history/audit", &audit)
		made, revoked = 0, 0
		for _, a := range audit {
			if a.Action == "token-create" {
				made++
			} else if a.Action == "token-revoke" {
				revoked++
			}
		}
		return made == 2 && revoked == 1
	})
	if !audited {
		t.Errorf("audit has %d token-create and %d token-revoke; want 2 and 1", made, revoked)
	}
}
