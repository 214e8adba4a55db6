package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The attack suite: each row is what an attacker sends to the real portal
// binary, the refusal expected (status and a word of its message or hint),
// and, after it, a check that nothing changed: no session cookie, the same
// claims, no audit row lost or added, no console session (no shell)
// opened. Rows cover the web trust boundaries that must hold (the old ones
// too, so they stay held).
//
// To add a row: give it a name, the portal settings it needs (rows with the
// same env share a portal), optional setup run before the "nothing
// changed" snapshot, and attack, which returns the attacker's last
// response. Put extra checks in after.

// attack is one row of the suite.
type attack struct {
	name string
	// env are extra portal settings; rows with equal env share a portal.
	env []string
	// setup prepares the row (claims, signed-in cookies) before the
	// snapshot that after the attack must be unchanged.
	setup func(t *testing.T, a *arena)
	// attack sends the attacker's requests and returns the last response.
	attack func(t *testing.T, a *arena) *http.Response
	// status is the refusal's HTTP status; says is a word its body has.
	status int
	says   string
	// after, if set, checks more than the common "nothing changed".
	after func(t *testing.T, a *arena, res *http.Response, body string)
	// changes, if set, lists audit actions the row may add (its setup's
	// own doing never counts, being before the snapshot).
	changes []string
	// consoles is how many console sessions the attack itself may open
	// (a watcher's, say); by default none.
	consoles int
}

const (
	admin    = "ops"
	rebindTo = "rebind.attacker.example"
)

// suiteEnv are the settings of every arena: the hardening under test.
var suiteEnv = []string{
	"CORRAL_VDI_ADMINS=" + admin,
	"CORRAL_VDI_DEMO_POOL_SIZE=4",
	"CORRAL_VDI_PUBLIC_URL=https://vdi.example.test",
	"CORRAL_VDI_MAX_CONSOLES_PER_USER=2",
	"CORRAL_VDI_METRICS_TOKEN=" + metricsToken,
	"CORRAL_VDI_PEER_SECRET=" + peerSecret,
}

const (
	metricsToken = "s3cret-metrics-token"
	peerSecret   = "peer-secret-0123456789abcdef"
)

func TestAttacks(t *testing.T) {
	rows := slices.Concat(attacks(), rdpTokenAttacks(), fileAttacks(), shareAttacks(), warmAttacks(), tokenAttacks(), clipImageAttacks(), screenAttacks(), vmScreenAttacks(), webrtcAttacks(), settingAttacks(), preflightAttacks())
	arenas := map[string]*arena{}
	for _, row := range rows { // portals live for the whole suite
		if key := strings.Join(row.env, " "); arenas[key] == nil {
			arenas[key] = newArena(t, row.env)
		}
	}
	runAttacks(t, rows, arenas)
}

// runAttacks runs each row against its arena (by its env): its setup, the
// attack, the answer's status and words, no session cookie handed to the
// attacker, nothing changed but what the row allows, then its own checks.
func runAttacks(t *testing.T, rows []attack, arenas map[string]*arena) {
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			a := arenas[strings.Join(row.env, " ")]
			if row.setup != nil {
				row.setup(t, a)
			}
			before := a.snapshot(t)
			res := row.attack(t, a)
			if res == nil {
				t.Fatal("the row's attack returned no response")
			}
			buf, _ := io.ReadAll(res.Body)
			res.Body.Close()
			body := string(buf)
			if res.StatusCode != row.status {
				t.Errorf("attack answered %d; want %d (%s)", res.StatusCode, row.status, body)
			}
			if row.says != "" && !strings.Contains(body, row.says) {
				t.Errorf("refusal does not say %q:\n%s", row.says, body)
			}
			for _, c := range res.Cookies() {
				if strings.Contains(c.Name, "corral_vdi_session") && c.MaxAge >= 0 && c.Value != "" {
					t.Errorf("the attacker got a session cookie %s", c.Name)
				}
			}
			a.checkUnchanged(t, before, row.changes, row.consoles)
			if row.after != nil {
				row.after(t, a, res, body)
			}
		})
	}
}

// attacks returns the rows, one per case of the web trust boundaries.
func attacks() []attack {
	rows := []attack{
		// DNS rebinding: a page on a name that resolves to 127.0.0.1 is
		// "same origin" to itself; only the Host check stops it.
		{
			name: "RebindSignInAsAdmin",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/signin", "login=ops&next=/", "Host", rebindTo+portOf(a.host),
					"Origin", "http://"+rebindTo+portOf(a.host), "Sec-Fetch-Site", "same-origin", "Content-Type", "application/x-www-form-urlencoded")
			},
			status: 421, says: "CORRAL_VDI_PUBLIC_URL",
		},
		{
			name: "RebindTailscaleHeaderFromLoopback",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/api/vdi/desktops/local/"+a.victim+"/release", "", "Host", rebindTo+portOf(a.host),
					"Origin", "http://"+rebindTo+portOf(a.host), "Sec-Fetch-Site", "same-origin", "Tailscale-User-Login", admin)
			},
			status: 421, says: "CORRAL_VDI_PUBLIC_URL",
		},
		{
			name: "RebindTerminalWebsocket",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/terminal/local/"+a.victim, "Host", rebindTo+portOf(a.host),
					"Origin", "http://"+rebindTo+portOf(a.host), "Tailscale-User-Login", "alice")
			},
			status: 421, says: "CORRAL_VDI_PUBLIC_URL",
		},
		// Sign-in by name only straight from a browser on this machine.
		{
			name: "SignInByNameThroughTailscaleServe",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/signin", "login=ops&next=/", "Content-Type", "application/x-www-form-urlencoded",
					"X-Forwarded-For", "100.64.0.7", "X-Forwarded-Proto", "https")
			},
			status: 403, says: "X-Forwarded-For",
		},
		{
			name: "SignInByNameThroughFunnel",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/signin", "login=ops&next=/", "Content-Type", "application/x-www-form-urlencoded",
					"Tailscale-Funnel-Request", "?1")
			},
			status: 403, says: "Tailscale-Funnel-Request",
		},
		{
			name: "SignInByNameThroughNginx",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/signin", "login=ops&next=/", "Content-Type", "application/x-www-form-urlencoded",
					"Via", "1.1 nginx", "Forwarded", "for=203.0.113.9")
			},
			status: 403, says: "proxy",
		},
		{
			name: "SignInByNameAtPublicName",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/signin", "login=ops&next=/", "Content-Type", "application/x-www-form-urlencoded",
					"Host", "vdi.example.test", "Origin", "https://vdi.example.test")
			},
			status: 403, says: "loopback address",
		},
		// No state change on GET: the kiosk.
		{
			name: "KioskClaimFromCrossSiteIframe",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/kiosk/demo", "", "Tailscale-User-Login", "bob", "Sec-Fetch-Site", "cross-site",
					"Sec-Fetch-Dest", "iframe", "Sec-Fetch-Mode", "navigate")
			},
			status: 200, says: `data-testid="kiosk-continue"`,
		},
		{
			name: "KioskClaimFromCrossSiteLink",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", "/kiosk/demo", "", "Tailscale-User-Login", "bob", "Sec-Fetch-Site", "cross-site",
					"Sec-Fetch-Dest", "document", "Sec-Fetch-Mode", "navigate")
			},
			status: 200, says: `data-testid="kiosk-continue"`,
		},
		{
			name: "KioskClaimByCrossSitePost",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "POST", "/kiosk/demo", "", "Tailscale-User-Login", "bob", "Sec-Fetch-Site", "cross-site",
					"Origin", "http://evil.example")
			},
			status: 403,
		},
		// Audit integrity: no-op actions write nothing; mutations are
		// rate-limited per user.
		{
			name: "AuditFloodWithNoOpStarts",
			setup: func(t *testing.T, a *arena) {
				var d desktop
				if code := a.p.API(t, "flooder", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 {
					t.Fatalf("flooder claims: %d", code)
				}
				waitFor(t, 10*time.Second, "flooder's desktop running", func() bool {
					a.p.API(t, "flooder", "GET", "/api/vdi/desktops/local/"+d.Name, &d)
					return d.Power == "running"
				})
				a.state["flooders"] = d.Name
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				// 60 at once: more than the burst of 30 however slow the machine.
				path := "/api/vdi/desktops/local/" + a.state["flooders"].(string) + "/start"
				results := make(chan *http.Response, 60)
				for range 60 {
					go func() { // not a.do: t.Fatal belongs to the test's goroutine
						req, _ := http.NewRequest("POST", a.p.URL+path, nil)
						req.Header.Set("Tailscale-User-Login", "flooder")
						res, err := http.DefaultClient.Do(req)
						if err != nil {
							res = &http.Response{StatusCode: 0, Body: io.NopCloser(strings.NewReader(err.Error()))}
						}
						results <- res
					}()
				}
				var refused *http.Response
				for range 60 {
					res := <-results
					if res.StatusCode == 429 && refused == nil {
						refused = res
						continue
					}
					if res.StatusCode != 200 && res.StatusCode != 429 {
						t.Errorf("a no-op start: %d", res.StatusCode)
					}
					res.Body.Close()
				}
				if refused == nil {
					t.Fatal("60 starts at once: none refused")
				}
				return refused
			},
			status: 429, says: "Wait",
			after: func(t *testing.T, a *arena, res *http.Response, body string) {
				if res.Header.Get("Retry-After") == "" {
					t.Error("429 without Retry-After")
				}
			},
		},
	}
	rows = append(rows, sessionAttacks()...)
	rows = append(rows, clipboardAttacks()...)
	rows = append(rows, recordingAttacks()...)
	rows = append(rows, recordingDeleteAttacks()...)
	rows = append(rows, consoleUXAttacks()...)
	rows = append(rows, controlAttacks()...)
	rows = append(rows, peerAttacks()...)
	rows = append(rows, standbyAttacks()...)
	return append(usbAttacks(), rows...)
}

// TestAttacks_TrickledBody is the slow attack kept out of the table: a
// client trickling a request body one byte a second no longer holds its
// connection (and a file descriptor) forever: the server's 30 s read
// timeout ends the request, which changes nothing.
func TestAttacks_TrickledBody(t *testing.T) {
	a := newArena(t, nil)
	before := a.snapshot(t)
	c, err := net.Dial("tcp", a.host)
	must(t, err)
	defer c.Close()
	fmt.Fprintf(c, "POST /api/vdi/desktops/local/%s/release HTTP/1.1\r\nHost: %s\r\nTailscale-User-Login: alice\r\n"+
		"Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"reason\":\"", a.victim, a.host)
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		io.Copy(io.Discard, c) // until the server hangs up
		closed <- time.Since(start)
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case d := <-closed:
			if d < 25*time.Second {
				t.Errorf("the server hung up after %v; want about the 30 s read timeout", d.Round(time.Second))
			}
			t.Logf("a trickled body was cut after %v", d.Round(100*time.Millisecond))
			a.checkUnchanged(t, before, nil, 0)
			return
		case <-tick.C:
			if time.Since(start) > 60*time.Second {
				t.Fatal("a trickled body held its connection for 60 s")
			}
			c.Write([]byte("x"))
		}
	}
}
