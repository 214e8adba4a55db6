package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// guestShell is a shell inside a local desktop, reached the way its holder
// reaches it: the terminal console's websocket. It runs with the desktop's
// DISPLAY, so xclip and xdpyinfo there see the desktop as its programs do.
type guestShell struct {
	t       *testing.T
	timeout time.Duration // how long run waits for a command
	*shellConn
}

// shellConn is the terminal websocket a guestShell and its views share.
type shellConn struct {
	ws  *websocket.Conn
	n   int
	mu  sync.Mutex
	out strings.Builder // everything the shell printed, read all along so pings get answers
}

// within returns a view of the shell that reports to t (a subtest) and
// waits up to d for each command: for a loop that forks hundreds of
// programs, which a loaded machine runs far slower than a quick command.
func (g *guestShell) within(t *testing.T, d time.Duration) *guestShell {
	return &guestShell{t: t, timeout: d, shellConn: g.shellConn}
}

func openGuestShell(t *testing.T, p *Portal, user, member string) *guestShell {
	t.Helper()
	ws, res, err := dialWS(p, user, "/ws/terminal/local/"+member, p.URL)
	if err != nil {
		t.Fatalf("terminal websocket: %v (%v)", err, res)
	}
	g := &guestShell{t: t, timeout: 20 * time.Second, shellConn: &shellConn{ws: ws}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, b, err := ws.ReadMessage()
			if err != nil {
				return
			}
			g.mu.Lock()
			g.out.Write(b)
			g.mu.Unlock()
		}
	}()
	t.Cleanup(func() { ws.Close(); <-done })
	return g
}

// run runs cmd and returns what the terminal showed until it finished. The
// end marker is printed from two pieces, so the echoed command line never
// contains it.
func (g *guestShell) run(cmd string) string {
	g.t.Helper()
	g.n++
	end := fmt.Sprintf("__done%d__", g.n)
	line := fmt.Sprintf("%s; printf '%%s%%s\\n' __do 'ne%d__'\r", cmd, g.n)
	g.mu.Lock()
	from := g.out.Len()
	g.mu.Unlock()
	must(g.t, g.ws.WriteMessage(websocket.TextMessage, []byte(line)))
	var out string
	if !eventually(g.timeout, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		out = g.out.String()[from:]
		return strings.Contains(out, end)
	}) {
		g.t.Fatalf("the shell did not finish %q; it printed:\n%s", cmd, out)
	}
	return out[:strings.LastIndex(out, end)]
}

// clipboard returns the desktop's CLIPBOARD selection as xclip reads it.
func (g *guestShell) clipboard() string {
	g.t.Helper()
	return g.run("echo; echo '<<'\"$(xclip -o -selection clipboard 2>/dev/null)\"'>>'")
}

// dimensions returns the X screen's size as xdpyinfo reports it.
func (g *guestShell) dimensions() string {
	g.t.Helper()
	m := regexp.MustCompile(`dimensions:\s+(\d+x\d+) pixels`).FindStringSubmatch(g.run("xdpyinfo | grep dimensions"))
	if m == nil {
		return ""
	}
	return m[1]
}

// screenSize returns the console's screen element size as WxH.
func screenSize(t *testing.T, page playwright.Page) string {
	t.Helper()
	v, err := page.Evaluate(`() => { const s = document.getElementById('screen'); return s.clientWidth + 'x' + s.clientHeight; }`)
	must(t, err)
	return v.(string)
}

// pasteAsKeys types text into the console from the clipboard panel and
// waits until it is typed.
func pasteAsKeys(t *testing.T, page playwright.Page, text string) {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(30000))
	must(t, page.GetByTestId("clipboard-text").Fill(text))
	must(t, page.GetByTestId("paste-as-keys").Click())
	// The button is off while it types: the note of an earlier paste of
	// the same length is not this one's.
	must(t, expect.Locator(page.GetByTestId("paste-as-keys")).ToBeEnabled())
	must(t, expect.Locator(page.GetByTestId("clipboard-note")).ToContainText(fmt.Sprintf("Typed %d characters", len([]rune(text)))))
}

// enterXterm types line into a terminal or serial page's xterm at once,
// as a paste would (Type as keys types 50 characters a second), and
// presses Enter.
func enterXterm(t *testing.T, page playwright.Page, line string) {
	t.Helper()
	must(t, page.Locator(".xterm-helper-textarea").Focus())
	must(t, page.Keyboard().InsertText(line))
	must(t, page.Keyboard().Press("Enter"))
}

// refusedAsKeys asks Type as keys to type text and waits for the refusal
// that names want, the characters that by (this console's keyboard, or
// a VM's layout) cannot type.
func refusedAsKeys(t *testing.T, page playwright.Page, text, by, want string) {
	t.Helper()
	must(t, page.GetByTestId("clipboard-text").Fill(text))
	must(t, page.GetByTestId("paste-as-keys").Click())
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(15000)).Locator(page.GetByTestId("clipboard-note")).
		ToContainText("Nothing typed: "+by+" cannot type "+want+"."))
}

// consoleKeyboard is what refuses characters on consoles that type keysyms
// or a US keyboard's keys.
const consoleKeyboard = "this console's keyboard"

// settledClipboard returns the desktop's CLIPBOARD text (without its last
// newline, as the shell prints it) once two reads half a second apart
// agree: programs that copy in a burst may still be taking the selection.
func settledClipboard(t *testing.T, g *guestShell) string {
	t.Helper()
	read := func() string { return between(g.clipboard(), "<<", ">>") }
	was := read()
	for range 20 {
		time.Sleep(500 * time.Millisecond)
		now := read()
		if now == was {
			return now
		}
		was = now
	}
	t.Fatalf("the desktop's clipboard kept changing: last %q", was)
	return ""
}
