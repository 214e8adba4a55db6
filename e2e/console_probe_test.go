package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// keyProbe watches a VNC console page for a test that types into the
// desktop, so that keys that never arrived can be followed: what the
// page's console websocket sent (by RFB message), where the page had its
// focus, what lay at the point the test clicked, and what the test's
// clicks and keys hit in the page.
type keyProbe struct {
	page playwright.Page

	mu    sync.Mutex
	sent  map[string]int // frames sent on console websockets, by what they carry
	bytes int64
}

// rfbKinds names the RFB client messages by their first byte (RFC 6143
// and the extensions noVNC sends); a text frame is the page's WebRTC
// signalling.
var rfbKinds = map[byte]string{
	0: "SetPixelFormat", 2: "SetEncodings", 3: "UpdateRequest", 4: "KeyEvent", 5: "PointerEvent",
	6: "ClientCutText", 150: "EnableContinuousUpdates", 248: "Fence", 250: "Xvp", 251: "SetDesktopSize",
	255: "QEMU", '{': "signalling", 'R': "version",
}

// watchKeys starts a probe on page; call it before the page opens its
// console (it follows the websockets opened from then on).
func watchKeys(page playwright.Page) *keyProbe {
	k := &keyProbe{page: page, sent: map[string]int{}}
	page.OnWebSocket(func(ws playwright.WebSocket) {
		if !strings.Contains(ws.URL(), "/ws/vnc/") {
			return
		}
		ws.OnFrameSent(func(b []byte) {
			kind := "empty"
			if len(b) > 0 {
				var ok bool
				if kind, ok = rfbKinds[b[0]]; !ok {
					kind = fmt.Sprintf("type %d", b[0])
				}
			}
			k.mu.Lock()
			k.sent[kind]++
			k.bytes += int64(len(b))
			k.mu.Unlock()
		})
	})
	return k
}

// arm listens in the page, from now on, for what each mousedown and
// keydown hits (in the capture phase, before the console's own handlers).
func (k *keyProbe) arm(t *testing.T) {
	t.Helper()
	_, err := k.page.Evaluate(`() => {
  const name = (el) => {
    if (!el) return 'nothing';
    let s = el.tagName.toLowerCase();
    if (el.id) s += '#' + el.id;
    if (typeof el.className === 'string' && el.className) s += '.' + el.className.trim().split(/\s+/).join('.');
    if (el.dataset?.testid) s += '[' + el.dataset.testid + ']';
    return s;
  };
  window.__keyProbe = { name, downs: [], keys: 0, keyTargets: {} };
  document.addEventListener('mousedown', (ev) => {
    const p = window.__keyProbe;
    p.downs.push(name(ev.target) + ' at ' + Math.round(ev.clientX) + ',' + Math.round(ev.clientY) + (ev.defaultPrevented ? ' (prevented)' : ''));
    if (p.downs.length > 8) p.downs.shift();
  }, true);
  document.addEventListener('keydown', (ev) => {
    const p = window.__keyProbe, n = name(ev.target);
    p.keys++;
    p.keyTargets[n] = (p.keyTargets[n] || 0) + 1;
  }, true);
}`)
	must(t, err)
}

// report says, for a failure, what the console websocket sent so far,
// where the page's focus is, what lies at the page point xy, and what
// the clicks and keys since arm hit.
func (k *keyProbe) report(xy []float64) string {
	k.mu.Lock()
	kinds := make([]string, 0, len(k.sent))
	for kind, n := range k.sent {
		kinds = append(kinds, fmt.Sprintf("%s %d", kind, n))
	}
	sent := k.bytes
	k.mu.Unlock()
	sort.Strings(kinds)
	page, err := k.page.Evaluate(`([x, y]) => {
  const p = window.__keyProbe;
  if (!p) return 'the probe was not armed';
  const screen = document.querySelector('#screen'), rfb = screen?.rfb;
  return [
    'focus on ' + p.name(document.activeElement) + (document.hasFocus() ? '' : ' (the document has no focus)'),
    'on top at ' + Math.round(x) + ',' + Math.round(y) + ': ' + p.name(document.elementFromPoint(x, y)),
    'mousedowns: ' + (p.downs.join('; ') || 'none'),
    p.keys + ' keydowns, on ' + JSON.stringify(p.keyTargets),
    'noVNC ' + (rfb ? rfb._rfbConnectionState + (rfb.viewOnly ? ', view only' : '') + (rfb._flushing ? ', flushing' : '') + ', ' + (rfb._display?._renderQ?.length ?? '?') + ' in its render queue' : 'absent'),
    'track ' + (screen?.dataset.rtc || 'none') + (screen?.dataset.rtcWhy ? ' (' + screen.dataset.rtcWhy + ')' : ''),
  ].join('\n  ');
}`, xy)
	if err != nil {
		page = "the page did not answer: " + err.Error()
	}
	return fmt.Sprintf("the console websocket sent %d bytes: %s\n  %v", sent, strings.Join(kinds, ", "), page)
}

// count returns how many frames of kind (a name in rfbKinds) the console
// websockets sent so far.
func (k *keyProbe) count(kind string) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent[kind]
}
