package e2e

import (
	"bytes"
	"fmt"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsoleStart_EarlyHandshake: the console page's early VNC socket
// (console-early.js) answers the screen hub's handshake (version 3.8,
// security None, a shared ClientInit) while noVNC loads, and noVNC's own
// answers are not sent again: the hub hears each once and the desktop
// draws. When the hub's side comes only after noVNC took the socket,
// noVNC answers it all, with the bytes the early socket would have sent;
// and a handshake the page does not know (here version 3.7, as a proxy
// between page and portal could say) is left to noVNC whole. Each case
// goes through a route of the page's websocket that records what the
// page sends the portal.
func TestConsoleStart_EarlyHandshake(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	d := mustClaim(t, p, "alice", "demo")
	hello := []byte("RFB 003.008\n\x01\x01") // the page's three answers, in order

	t.Run("answered while noVNC loads", func(t *testing.T) {
		page := b.MustNewPage(t, 1280, 800)
		// noVNC's module comes 1.5 s late: the hub's handshake is over by then.
		must(t, page.Route("**/novnc.*/rfb.js", func(r playwright.Route) {
			go func() { time.Sleep(1500 * time.Millisecond); r.Continue() }()
		}))
		sent := routeVNC(t, page, nil)
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		if !hasMeasure(page, "rfb-early-handshake") {
			t.Errorf("the page did not answer the hub's handshake before noVNC loaded")
		}
		got := sent.bytes()
		if !bytes.HasPrefix(got, hello) || len(got) == len(hello) || got[len(hello)] != 0 {
			t.Errorf("the page sent the hub %q…; want each handshake answer once (%q), then noVNC's SetPixelFormat", head(got, 24), hello)
		}
	})

	t.Run("the hub's side after noVNC took the socket", func(t *testing.T) {
		page := b.MustNewPage(t, 1280, 800)
		sent := routeVNC(t, page, func() bool { return hasMeasure(page, "vnc-import") })
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		if hasMeasure(page, "rfb-early-handshake") {
			t.Errorf("the page answered the handshake early though noVNC had the socket first")
		}
		if got := sent.bytes(); !bytes.HasPrefix(got, hello) || len(got) == len(hello) || got[len(hello)] != 0 {
			t.Errorf("noVNC sent the hub %q…; want %q, the answers the early socket gives, then its SetPixelFormat", head(got, 24), hello)
		}
	})

	t.Run("a handshake the page does not know is noVNC's", func(t *testing.T) {
		page := b.MustNewPage(t, 1280, 800)
		must(t, page.Route("**/novnc.*/rfb.js", func(r playwright.Route) {
			go func() { time.Sleep(1500 * time.Millisecond); r.Continue() }()
		}))
		sent := routeVNC(t, page, nil, func(m []byte) []byte {
			if string(m) == "RFB 003.008\n" {
				return []byte("RFB 003.007\n") // the hub takes 3.7 as well
			}
			return m
		})
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		if hasMeasure(page, "rfb-early-handshake") {
			t.Errorf("the page answered a 3.7 handshake as a 3.8 one")
		}
		if got, want := sent.bytes(), []byte("RFB 003.007\n\x01\x01"); !bytes.HasPrefix(got, want) {
			t.Errorf("the page sent %q…; want noVNC's own 3.7 answers %q", head(got, 24), want)
		}
	})

	t.Run("noVNC answering otherwise", func(t *testing.T) {
		// Planted on every object, shared: false makes noVNC's ClientInit
		// 0 where the page answered 1 for it: the page ends that socket
		// before noVNC's bytes reach the hub (it got the page's 14) and
		// connects anew, noVNC answering all of the new one's handshake.
		// (The sockets go unrouted: noVNC does not take a routed one.)
		page := b.MustNewPage(t, 1280, 800)
		must(t, page.AddInitScript(playwright.Script{Content: playwright.String(
			`Object.defineProperty(Object.prototype, 'shared', { value: false, writable: true, configurable: true });`)}))
		must(t, page.Route("**/novnc.*/rfb.js", func(r playwright.Route) {
			go func() { time.Sleep(1500 * time.Millisecond); r.Continue() }()
		}))
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		ended := regexp.MustCompile(`console closed.* bytesIn=(\d+) .*close 4001`).FindStringSubmatch(p.Log())
		if ended == nil {
			t.Fatalf("the portal logged no console ended by the page's close 4001")
		}
		if ended[1] != fmt.Sprint(len(hello)) {
			t.Errorf("the hub got %s bytes on the ended socket; want the page's early answers' %d", ended[1], len(hello))
		}
	})
}

// sentLog is what a page sent on its routed VNC websockets: each
// socket's bytes, in order.
type sentLog struct {
	mu      sync.Mutex
	sockets [][]byte
}

// bytes returns what the page sent on its first socket.
func (s *sentLog) bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.sockets) == 0 {
		return nil
	}
	return bytes.Clone(s.sockets[0])
}

// routeVNC routes page's VNC websockets to the portal, recording what the
// page sends. The portal's messages wait until open() reports true (nil:
// at once), and each passes through rewrite, if given, on its way to the
// page.
func routeVNC(t *testing.T, page playwright.Page, open func() bool, rewrite ...func([]byte) []byte) *sentLog {
	t.Helper()
	log := &sentLog{}
	must(t, page.RouteWebSocket("**/ws/vnc/**", func(ws playwright.WebSocketRoute) {
		server, err := ws.ConnectToServer()
		if err != nil {
			t.Errorf("route to the portal: %v", err)
			return
		}
		log.mu.Lock()
		i := len(log.sockets)
		log.sockets = append(log.sockets, nil)
		log.mu.Unlock()
		ws.OnMessage(func(m any) {
			if b, ok := m.([]byte); ok {
				log.mu.Lock()
				log.sockets[i] = append(log.sockets[i], b...)
				log.mu.Unlock()
			}
			server.Send(m)
		})
		var mu sync.Mutex
		var held []any
		released := open == nil
		server.OnMessage(func(m any) {
			if b, ok := m.([]byte); ok {
				for _, f := range rewrite {
					m = f(b)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !released {
				held = append(held, m)
				return
			}
			ws.Send(m)
		})
		if open != nil {
			go func() {
				for !open() {
					time.Sleep(50 * time.Millisecond)
				}
				mu.Lock()
				defer mu.Unlock()
				for _, m := range held {
					ws.Send(m)
				}
				held, released = nil, true
			}()
		}
	}))
	return log
}

// consoleDrawn waits until page's VNC console says Connected and its
// canvas holds the desktop.
func consoleDrawn(t *testing.T, page playwright.Page) {
	t.Helper()
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(20000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	waitFor(t, 20*time.Second, "the desktop drawn", func() bool {
		v, err := page.Evaluate(`() => { const c = document.querySelector('#screen canvas'); return c && c.width > 100 ? 1 : 0; }`)
		return err == nil && toInt(v) == 1
	})
}

// hasMeasure says whether page has a performance measure of that name.
func hasMeasure(page playwright.Page, name string) bool {
	v, err := page.Evaluate(`(n) => performance.getEntriesByName(n).length`, name)
	return err == nil && toInt(v) > 0
}

// head returns b's first n bytes at most.
func head(b []byte, n int) []byte { return b[:min(n, len(b))] }
