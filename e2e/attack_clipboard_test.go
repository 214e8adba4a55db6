package e2e

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// clipboardAttacks are the attack suite's rows for console clipboards: a
// holder's own client that ignores the page and the pool's policy, and one
// that floods the desktop with huge cut texts. The relay, not the page,
// must hold both.
func clipboardAttacks() []attack {
	// cutText is a classic ClientCutText message.
	cutText := func(text string) []byte {
		n := len(text)
		return append([]byte{6, 0, 0, 0, byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)}, text...)
	}
	// holderVNC opens alice's own VNC console of her desktop.
	// The consoles of the row before may still count against her limit
	// for a moment after they closed (the portal writes their end first).
	holderVNC := func(t *testing.T, a *arena) (*websocket.Conn, *http.Response) {
		h := http.Header{"Tailscale-User-Login": {"alice"}, "Origin": {"http://" + a.host}}
		ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/vnc/local/"+a.victim, h)
		for end := time.Now().Add(10 * time.Second); err != nil && res != nil && res.StatusCode == http.StatusTooManyRequests && time.Now().Before(end); {
			time.Sleep(100 * time.Millisecond)
			ws, res, err = websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/vnc/local/"+a.victim, h)
		}
		if err != nil {
			if res != nil {
				body, _ := io.ReadAll(res.Body)
				t.Fatalf("alice opens her VNC console: %v (%d %s)", err, res.StatusCode, body)
			}
			t.Fatalf("alice opens her VNC console: %v", err)
		}
		return ws, res
	}
	// dropped returns the portal's log lines of clipboard drops for reason.
	dropped := func(a *arena, reason string) string {
		var out []string
		for _, line := range strings.Split(a.p.Log(), "\n") {
			// slog's text quotes a value with a space in it.
			if strings.Contains(line, "clipboard dropped") && (strings.Contains(line, "reason="+strconv.Quote(reason)) || strings.Contains(line, "reason="+reason+" ")) {
				out = append(out, line)
			}
		}
		return strings.Join(out, "\n")
	}
	return []attack{
		// The pool says clipboard off; the holder's own RFB client sends
		// cut text anyway, classic and in the Extended Clipboard format.
		{
			name: "CutTextPastAClipboardOffPolicy",
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, admin, "PATCH", "/api/vdi/pools/local/demo", `{"policy":{"clipboard":"off"}}`, nil); code != 200 {
					t.Fatalf("admin turns the clipboard off: %d", code)
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				// The console stays open: a desktop forgets a client's
				// clipboard when the client goes.
				ws, res := holderVNC(t, a)
				t.Cleanup(func() { ws.Close() })
				send := rfbHandshake(t, ws)
				provide := []byte{6, 0, 0, 0, 0xff, 0xff, 0xff, 0xf0, 0x10, 0, 0, 1} // extended provide, text, 12 bytes of zlib after
				send(cutText("exfil-into-desktop"))
				send(append(provide, make([]byte, 12)...))
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				defer a.p.APIBody(t, admin, "PATCH", "/api/vdi/pools/local/demo", `{"policy":{}}`, nil)
				shell := openGuestShell(t, a.p, "alice", a.victim)
				for range 3 {
					if got := shell.clipboard(); strings.Contains(got, "exfil") {
						t.Fatalf("the desktop's clipboard got the cut text past the policy: %q", got)
					}
					time.Sleep(300 * time.Millisecond)
				}
				if !strings.Contains(dropped(a, "policy"), "direction=to-desktop") {
					t.Errorf("no to-desktop policy drop in the portal's log:\n%s", a.p.Log())
				}
			},
		},
		// Forty cut texts of 300 KB: the relay cuts each to its cap and
		// lets a burst through, then drops the flood; the desktop stays
		// usable and its clipboard holds at most the cap.
		{
			name: "CutTextFloodIntoTheDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := holderVNC(t, a)
				t.Cleanup(func() { ws.Close() })
				a.state["flooding"] = ws
				send := rfbHandshake(t, ws)
				for i := range 40 {
					send(cutText(strings.Repeat(strconv.Itoa(i%10), 300<<10)))
				}
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				shell := openGuestShell(t, a.p, "alice", a.victim)
				n := 0
				eventually(10*time.Second, func() bool {
					fields := strings.Fields(shell.run("echo; xclip -o -selection clipboard | wc -c"))
					n, _ = strconv.Atoi(fields[len(fields)-1])
					return n > 0
				})
				if n == 0 || n > relay.DefaultMaxCutText {
					t.Errorf("the desktop's clipboard holds %d bytes; want some, at most %d", n, relay.DefaultMaxCutText)
				}
				// Closing the flood's console reports the drops not yet logged.
				a.state["flooding"].(*websocket.Conn).Close()
				if !eventually(5*time.Second, func() bool { return dropped(a, "too large") != "" && dropped(a, "flood") != "" }) {
					t.Errorf("the portal's log lacks too-large and flood drops:\n%s", a.p.Log())
				}
				ws, _ := holderVNC(t, a) // and a console still works (taking over the flooding one)
				defer ws.Close()
				rfbClient(t, ws, nil)
			},
		},
	}
}
