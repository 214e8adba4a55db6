package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The attack suite's arena: the portal under attack, the requests rows
// send it, and the "nothing changed" snapshot (attack_test.go).

// arena is a portal under attack and what the rows share about it.
type arena struct {
	p *Portal
	// alice holds victim; mallory holds her own desktop.
	victim, mallorys string
	host             string // the portal's host:port
	state            map[string]any
}

// newArena starts a portal for rows with env: alice holds a desktop of
// the demo pool, mallory another.
func newArena(t *testing.T, env []string) *arena {
	t.Helper()
	env = append(append([]string{}, suiteEnv...), env...)
	if slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "CORRAL_VDI_DEMO_VM_POOL_SIZE=") }) {
		env = append(env, "CORRAL_VDI_VM_IMAGE="+vmImage(t)) // this checkout's, not the cache's current
	}
	p := MustStartPortal(t, env...)
	a := &arena{p: p, host: strings.TrimPrefix(p.URL, "http://"), state: map[string]any{}}
	d := mustClaim(t, p, "alice", "demo")
	a.victim = d.Name
	if code := p.API(t, "mallory", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 {
		t.Fatalf("mallory claims: %d", code)
	}
	a.mallorys = d.Name
	return a
}

// portOf returns ":port" of host:port.
func portOf(hostport string) string { return hostport[strings.LastIndex(hostport, ":"):] }

// do sends one request to the portal with header pairs (Host sets the
// Host header) and returns the response without following redirects.
func (a *arena) do(t *testing.T, method, path, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, a.p.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// dialWS opens a websocket to path with header pairs and returns the
// handshake's response; an upgraded connection stays open until the
// test ends (that is the point of some rows).
func (a *arena) dialWS(t *testing.T, path string, header ...string) *http.Response {
	t.Helper()
	h := http.Header{}
	for i := 0; i+1 < len(header); i += 2 {
		h.Set(header[i], header[i+1])
	}
	ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+path, h)
	if ws != nil {
		t.Cleanup(func() { ws.Close() })
	}
	if res == nil {
		t.Fatalf("websocket %s: %v", path, err)
	}
	return res
}

// signIn signs login in by name, as a browser on this machine would, and
// returns the session cookie.
func (a *arena) signIn(t *testing.T, login string) *http.Cookie {
	t.Helper()
	res := a.do(t, "POST", "/signin", url.Values{"login": {login}, "next": {"/"}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", "http://"+a.host)
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "corral_vdi_session" && c.Value != "" {
			return c
		}
	}
	t.Fatalf("signing in %s by name: %d, no cookie", login, res.StatusCode)
	return nil
}

// freeMember returns a demo member nobody holds.
func (a *arena) freeMember(t *testing.T) string {
	t.Helper()
	var all []desktop
	a.p.API(t, admin, "GET", "/api/vdi/desktops?all=1", &all)
	for _, d := range all {
		if d.free() {
			return d.Name
		}
	}
	t.Fatal("no free demo member")
	return ""
}

// auditRow is an audit log row as the JSON history lists it.
type auditRow struct {
	ID     int64  `json:"id"`
	Actor  string `json:"actor"`
	Action string `json:"action"`
	Target string `json:"target"`
}

// snapshot is what no attack may change.
type snapshot struct {
	holders  map[string]string // member -> holder
	audit    []auditRow
	sessions int // console sessions ever opened
}

func (a *arena) snapshot(t *testing.T) snapshot {
	t.Helper()
	s := snapshot{holders: map[string]string{}}
	var all []desktop
	if code := a.p.API(t, admin, "GET", "/api/vdi/desktops?all=1", &all); code != 200 {
		t.Fatalf("admin lists desktops: %d", code)
	}
	for _, d := range all {
		s.holders[d.Name] = d.Holder
	}
	if code := a.p.API(t, admin, "GET", "/api/vdi/history/audit?limit=100000", &s.audit); code != 200 {
		t.Fatalf("admin reads the audit log: %d", code)
	}
	var sessions []json.RawMessage
	a.p.API(t, admin, "GET", "/api/vdi/history/sessions?limit=100000", &sessions)
	s.sessions = len(sessions)
	return s
}

// openSessions returns the console sessions open now.
func (a *arena) openSessions(t *testing.T) []json.RawMessage {
	t.Helper()
	var sessions []struct {
		ID     string    `json:"id"`
		Closed time.Time `json:"closed"`
	}
	a.p.API(t, admin, "GET", "/api/vdi/history/sessions?limit=100000", &sessions)
	var open []json.RawMessage
	for _, s := range sessions {
		if s.Closed.IsZero() {
			open = append(open, json.RawMessage(fmt.Sprintf("%q", s.ID)))
		}
	}
	return open
}

// checkUnchanged compares the portal with before: the same holders, every
// audit row still there and none added (but for actions the row allows),
// no console session opened.
func (a *arena) checkUnchanged(t *testing.T, before snapshot, allowed []string, consoles int) {
	t.Helper()
	time.Sleep(100 * time.Millisecond) // a refused websocket's session would be recorded by now
	after := a.snapshot(t)
	for m, h := range before.holders {
		if after.holders[m] != h {
			t.Errorf("desktop %s: holder %q -> %q", m, h, after.holders[m])
		}
	}
	ids := map[int64]bool{}
	for _, r := range after.audit {
		ids[r.ID] = true
	}
	old := map[int64]bool{}
	for _, r := range before.audit {
		old[r.ID] = true
		if !ids[r.ID] {
			t.Errorf("audit row lost: %+v", r)
		}
	}
	for _, r := range after.audit {
		if !old[r.ID] && !slices.Contains(allowed, r.Action) {
			t.Errorf("audit row added: %+v", r)
		}
	}
	if after.sessions != before.sessions+consoles {
		t.Errorf("console sessions: %d -> %d; want %d opened", before.sessions, after.sessions, consoles)
	}
}

// entitledPool makes pool fin, for group finance only (once per arena).
func entitledPool(t *testing.T, a *arena) {
	t.Helper()
	code := a.p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name":"fin","size":1,"access":{"groups":["finance"]}}`, nil)
	if code != 201 && code != 409 {
		t.Fatalf("create pool fin: %d", code)
	}
}
