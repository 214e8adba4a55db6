package e2e

import (
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// usbAttacks are the rows of USB redirection: the holder's own VM only,
// never an admin's device in someone's desktop, never cross-origin, never
// a session desktop, never with a made-up token.
func usbAttacks() []attack {
	return []attack{
		{
			name: "USBRedirByNonHolder",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", "mallory", "Origin", "http://"+a.host)
			},
			status: 403, says: "is not yours",
		},
		{
			name: "USBRedirByAdminNotHolder",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", admin, "Origin", "http://"+a.host)
			},
			status: 403, says: "Only the desktop's holder",
		},
		{
			name: "USBRedirCrossOrigin",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://evil.example")
			},
			status: 403, says: "origin",
		},
		{
			name: "USBRedirSessionDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 400, says: "Not supported: USB needs a KubeVirt or QEMU VM",
		},
		{
			name: "USBRedirForgedToken",
			attack: func(t *testing.T, a *arena) *http.Response {
				forged := "eyJ1IjoiYWxpY2UiLCJkIjoibG9jYWwvZGVtby0xIiwiZSI6OTk5OTk5OTk5OX0.AAAA"
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Authorization", "Bearer "+forged)
			},
			status: 401, says: "not valid",
		},
		{
			name: "USBRedirRebind",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/usbredir/local/"+a.victim, "Host", rebindTo+portOf(a.host),
					"Origin", "http://"+rebindTo+portOf(a.host), "Tailscale-User-Login", "alice")
			},
			status: 421, says: "CORRAL_VDI_PUBLIC_URL",
		},
	}
}

// usbToken reads the USB token from the console page of member, as the
// holder sees it (cookie, or the identity header when cookie is nil).
func usbToken(t *testing.T, p *Portal, user string, cookie *http.Cookie, member string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", p.URL+"/desktops/local/"+member, nil)
	if cookie != nil {
		req.AddCookie(cookie)
	} else {
		req.Header.Set("Tailscale-User-Login", user)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	m := regexp.MustCompile(`--token ([A-Za-z0-9_.-]+)`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("console page of %s (%d) shows no USB token:\n%s", member, res.StatusCode, body)
	}
	return string(m[1])
}

// dialUSB opens /ws/usbredir/local/member with a bearer token, as `usb
// redir --token` does.
func dialUSB(p *Portal, member, token string) (*websocket.Conn, *http.Response, error) {
	h := http.Header{"Authorization": {"Bearer " + token}}
	d := websocket.Dialer{HandshakeTimeout: 10 * time.Second}
	return d.Dial("ws"+strings.TrimPrefix(p.URL, "http")+"/ws/usbredir/local/"+member, h)
}

// TestAttack_USBTokenAfterSignOut: a USB token copied before its user
// signed out, or before an admin ended their sessions, opens nothing; and
// a USB stream open when an admin ends the sessions closes.
func TestAttack_USBTokenAfterSignOut(t *testing.T) {
	img := vmImage(t)
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_DEMO_VM_POOL_SIZE=1", "CORRAL_VDI_VM_IMAGE="+img, "CORRAL_VDI_ADMINS="+admin)
	d := claimVM(t, p, "alice")
	waitFor(t, 60*time.Second, "the VM to run", func() bool {
		var got desktop
		p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+d.Name, &got)
		return got.Power == "running"
	})
	refused := func(t *testing.T, what, token string) {
		t.Helper()
		ws, res, err := dialUSB(p, d.Name, token)
		if ws != nil {
			ws.Close()
		}
		if res == nil {
			t.Fatalf("%s: %v", what, err)
		}
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 401 || !strings.Contains(string(body), "signed out") {
			t.Errorf("%s: %d %s; want 401 saying the token ended at the sign-out", what, res.StatusCode, body)
		}
	}

	t.Run("SignOut", func(t *testing.T) {
		cookie := signInByName(t, p, "alice")
		token := usbToken(t, p, "alice", cookie, d.Name)
		req, _ := http.NewRequest("POST", p.URL+"/signout", nil)
		req.AddCookie(cookie)
		req.Header.Set("Origin", p.URL)
		client := http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		res, err := client.Do(req)
		must(t, err)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther {
			t.Fatalf("sign-out: %d", res.StatusCode)
		}
		refused(t, "the token after its user signed out", token)
	})
	t.Run("EndSessions", func(t *testing.T) {
		time.Sleep(10 * time.Millisecond) // a token minted after the sign-out above
		token := usbToken(t, p, "alice", nil, d.Name)
		if code := p.API(t, admin, "POST", "/api/vdi/users/alice/end-sessions", nil); code != 200 {
			t.Fatalf("end-sessions: %d", code)
		}
		refused(t, "the token after an admin ended its user's sessions", token)
	})
	t.Run("OpenStreamCloses", func(t *testing.T) {
		time.Sleep(10 * time.Millisecond)
		token := usbToken(t, p, "alice", nil, d.Name)
		ws, res, err := dialUSB(p, d.Name, token)
		if err != nil {
			var body []byte
			if res != nil {
				body, _ = io.ReadAll(res.Body)
			}
			t.Fatalf("USB stream with a fresh token: %v %s", err, body)
		}
		defer ws.Close()
		ws.WriteMessage(websocket.BinaryMessage, relay.USBRedirHello("e2e", 0))
		if code := p.API(t, admin, "POST", "/api/vdi/users/alice/end-sessions", nil); code != 200 {
			t.Fatalf("end-sessions: %d", code)
		}
		ended := time.Now()
		ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				var ne net.Error
				if errors.As(err, &ne) && ne.Timeout() {
					t.Fatalf("the USB stream is still open 15s after an admin ended alice's sessions")
				}
				break
			}
		}
		t.Logf("the USB stream closed %v after end-sessions", time.Since(ended).Round(time.Millisecond))
	})
}
