package e2e

import (
	"bytes"
	"fmt"
	"regexp"
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
// between page and portal could say) is left to noVNC whole. A script in
// the page (vncWatch) records what it sends on its VNC sockets and, for
// the cases that need it, holds or rewrites what the portal sends, in
// order (Playwright's websocket route forwards each message on a
// goroutine of its own, which a busy machine reorders).
func TestConsoleStart_EarlyHandshake(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	d := mustClaim(t, p, "alice", "demo")
	hello := []byte("RFB 003.008\n\x01\x01") // the page's three answers, in order
	open := func(t *testing.T, mode string) playwright.Page {
		page := b.MustNewPage(t, 1280, 800)
		must(t, page.AddInitScript(playwright.Script{Content: playwright.String("window.__vncMode = '" + mode + "';" + vncWatch)}))
		return page
	}

	t.Run("answered while noVNC loads", func(t *testing.T) {
		page := open(t, "")
		delayNoVNC(t, page)
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		if !hasMeasure(page, "rfb-early-handshake") {
			t.Errorf("the page did not answer the hub's handshake before noVNC loaded")
		}
		if got := sentVNC(t, page); !bytes.HasPrefix(got, hello) || len(got) == len(hello) || got[len(hello)] != 0 {
			t.Errorf("the page sent the hub %q…; want each handshake answer once (%q), then noVNC's SetPixelFormat", head(got, 24), hello)
		}
	})

	t.Run("the hub's side after noVNC took the socket", func(t *testing.T) {
		page := open(t, "late")
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		if hasMeasure(page, "rfb-early-handshake") {
			t.Errorf("the page answered the handshake early though noVNC had the socket first")
		}
		if got := sentVNC(t, page); !bytes.HasPrefix(got, hello) || len(got) == len(hello) || got[len(hello)] != 0 {
			t.Errorf("noVNC sent the hub %q…; want %q, the answers the early socket gives, then its SetPixelFormat", head(got, 24), hello)
		}
	})

	t.Run("a handshake the page does not know is noVNC's", func(t *testing.T) {
		page := open(t, "v37")
		delayNoVNC(t, page)
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
		consoleDrawn(t, page)
		if hasMeasure(page, "rfb-early-handshake") {
			t.Errorf("the page answered a 3.7 handshake as a 3.8 one")
		}
		if got, want := sentVNC(t, page), []byte("RFB 003.007\n\x01\x01"); !bytes.HasPrefix(got, want) {
			t.Errorf("the page sent %q…; want noVNC's own 3.7 answers %q (the hub takes 3.7 too)", head(got, 24), want)
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
		delayNoVNC(t, page)
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

// vncWatch, run in a page before its scripts with window.__vncMode set,
// wraps its VNC websockets: what the page sends on the first is kept in
// window.__vncSent, and the portal's messages reach the page's listeners
// in order through one listener of its own — held until noVNC has loaded
// (mode "late"), or with the hub's version rewritten to 3.7 ("v37").
const vncWatch = `(() => {
  const WS = window.WebSocket;
  window.__vncSent = null;
  window.WebSocket = function (url, protocols) {
    const ws = new WS(url, protocols);
    if (!String(url).includes('/ws/vnc/') || window.__vncSent) return ws;
    const sent = window.__vncSent = [];
    const send = ws.send.bind(ws);
    ws.send = (d) => {
      const b = d instanceof ArrayBuffer ? new Uint8Array(d) : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
      sent.push(...b);
      send(d);
    };
    const listeners = [];
    let onmessage = null;
    const held = [];
    const open = () => window.__vncMode !== 'late' || performance.getEntriesByName('vnc-import').length > 0;
    const deliver = (ev) => {
      for (const l of listeners.slice()) l.call(ws, ev);
      if (onmessage) onmessage.call(ws, ev);
    };
    const release = () => {
      if (!open()) { setTimeout(release, 20); return; }
      while (held.length) deliver(held.shift());
    };
    ws.addEventListener('message', (ev) => {
      let e = ev;
      if (window.__vncMode === 'v37' && typeof ev.data !== 'string' && new TextDecoder().decode(ev.data) === 'RFB 003.008\n') {
        e = new MessageEvent('message', { data: new TextEncoder().encode('RFB 003.007\n').buffer });
      }
      if (held.length || !open()) { held.push(e); if (held.length === 1) release(); return; }
      deliver(e);
    });
    const add = ws.addEventListener.bind(ws);
    ws.addEventListener = (type, fn, opts) => type === 'message' ? listeners.push(fn) : add(type, fn, opts);
    Object.defineProperty(ws, 'onmessage', { get: () => onmessage, set: (fn) => { onmessage = fn; } });
    return ws;
  };
  window.WebSocket.prototype = WS.prototype;
  Object.assign(window.WebSocket, { CONNECTING: 0, OPEN: 1, CLOSING: 2, CLOSED: 3 });
})();`

// sentVNC returns what page sent on its first VNC websocket (vncWatch).
func sentVNC(t *testing.T, page playwright.Page) []byte {
	t.Helper()
	v, err := page.Evaluate(`() => window.__vncSent || []`)
	must(t, err)
	var out []byte
	for _, x := range v.([]any) {
		out = append(out, byte(toInt(x)))
	}
	return out
}

// delayNoVNC makes noVNC's module come to page 1.5 s late: the hub's
// handshake is over by the time noVNC takes the page's early socket.
func delayNoVNC(t *testing.T, page playwright.Page) {
	t.Helper()
	must(t, page.Route("**/novnc.*/rfb.js", func(r playwright.Route) {
		go func() { time.Sleep(1500 * time.Millisecond); r.Continue() }()
	}))
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
