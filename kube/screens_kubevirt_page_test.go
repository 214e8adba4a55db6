package kube_test

import (
	"io"
	"log"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/internal/testbrowser"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// front is the Service in front of the portal replicas as one user's
// browser reaches them: it vouches for the user (as `tailscale serve`
// does, the client's Tailscale-User-Login replaced) and sends each new
// request, websockets too, to the replica the test chose (sendTo), as a
// Service does once the Pods it no longer sends to are not ready.
type front struct {
	url string
	mu  sync.Mutex
	to  *replica
}

// startFront starts user's front, sending to r; it stops when t ends.
func startFront(t *testing.T, user string, r *replica) *front {
	t.Helper()
	f := &front{to: r}
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		f.mu.Lock()
		to, _ := url.Parse(f.to.url)
		f.mu.Unlock()
		pr.SetURL(to)
		pr.Out.Host = pr.In.Host // the page's origin, which the portal checks the Origin against
		pr.Out.Header.Set("Tailscale-User-Login", user)
	}, ErrorLog: log.New(io.Discard, "", 0)} // a replica gone is the page's to say
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	f.url = srv.URL
	return f
}

// sendTo sends the front's new requests to r; a connection open through
// it stays on its replica.
func (f *front) sendTo(r *replica) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.to = r
}

// consolePage is a user's console page of a desktop in Chromium, through
// a front of theirs.
type consolePage struct {
	page  playwright.Page
	front *front
	user  string
}

// openPage opens user's page at path in a fresh context of br, through a
// front of theirs sending to r, and waits for its console to connect.
func openPage(t *testing.T, br *testbrowser.Browser, user, path string, r *replica) *consolePage {
	t.Helper()
	p := &consolePage{front: startFront(t, user, r), user: user}
	p.page = br.MustNewPage(t, 1280, 800)
	t.Cleanup(func() {
		if t.Failed() {
			testbrowser.Screenshot(t, p.page, user+"-failed")
		}
	})
	if _, err := p.page.Goto(p.front.url + path); err != nil {
		t.Fatal(err)
	}
	p.connected(t, user+" opened "+path+" on "+r.name)
	return p
}

// connected waits for the page to say it is connected and has it note
// what it says from then on (testbrowser.RecordStates).
func (p *consolePage) connected(t *testing.T, what string) {
	t.Helper()
	if err := playwright.NewPlaywrightAssertions(60000).Locator(p.page.GetByTestId("status")).ToContainText("Connected"); err != nil {
		t.Fatalf("%s: the page is not connected: %v", what, err)
	}
	if _, err := p.page.Evaluate(testbrowser.RecordStates); err != nil {
		t.Fatal(err)
	}
}

// reconnected waits for the page, whose console was cut (its replica
// killed or drained, or the screen's owner), to connect again by itself
// (no load of it again). In between it said that it reconnects, and
// what it says must have (a clause of its own, or ""), and nothing of
// the desktop closing or failing.
func (p *consolePage) reconnected(t *testing.T, what, must string) {
	t.Helper()
	var said []string
	for end := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		said = testbrowser.Said(t, p.page)
		if len(said) > 1 && strings.HasPrefix(said[len(said)-1], "Connected") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("%s: %s's page said %q and did not connect again within a minute", what, p.user, said)
		}
	}
	t.Logf("%s: %s's page said, in turn: %q", what, p.user, said)
	all := strings.Join(said, "\n")
	if !strings.Contains(all, "Reconnecting in") || strings.Contains(all, "closed the connection") || strings.Contains(all, "failed") {
		t.Errorf("%s: %s's page said %q; want it to say it reconnects, and nothing of the desktop closing or failing", what, p.user, said)
	}
	if !strings.Contains(all, must) {
		t.Errorf("%s: %s's page said %q; want it to say %q", what, p.user, said, must)
	}
	if _, err := p.page.Evaluate(`() => { window.seenStates = [] }`); err != nil {
		t.Fatal(err)
	}
}

// serialPage is alice's serial console of a desktop as she sees it: its
// console page.
type serialPage struct{ *consolePage }

// openSerialPage opens alice's serial console page of ref on r.
func openSerialPage(t *testing.T, br *testbrowser.Browser, ref vdi.Ref, r *replica) *serialPage {
	t.Helper()
	return &serialPage{openPage(t, br, "alice", "/desktops/"+ref.Namespace+"/"+ref.Name+"?protocol=serial", r)}
}

// read returns the console's text once it shows want, or after 30 s.
func (p *serialPage) read(want string) string {
	var text string
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && !strings.Contains(text, want); time.Sleep(200 * time.Millisecond) {
		v, err := p.page.Evaluate(testbrowser.XtermText)
		if err != nil {
			return err.Error()
		}
		text, _ = v.(string)
	}
	return text
}

// send types text into the page, as on alice's keyboard.
func (p *serialPage) send(t *testing.T, text string) {
	t.Helper()
	if err := p.page.GetByTestId("xterm").Click(); err != nil {
		t.Fatal(err)
	}
	if err := p.page.Keyboard().Type(strings.ReplaceAll(text, "\r", "\n")); err != nil {
		t.Fatal(err)
	}
}

// again waits for the page, whose console was cut (its replica killed,
// or drained: moves, and it says the console moves), to connect again
// by itself, the front now sending it to r.
func (p *serialPage) again(t *testing.T, what string, _ *replica, moves bool) {
	t.Helper()
	must := ""
	if moves {
		must = console.ConsoleMoves[1:]
	}
	p.reconnected(t, what, must)
}

// reload: alice loads her page again, which the front sends to r.
func (p *serialPage) reload(t *testing.T, r *replica) {
	t.Helper()
	p.front.sendTo(r)
	if _, err := p.page.Reload(); err != nil {
		t.Fatal(err)
	}
	p.connected(t, "alice reloaded her serial page onto "+r.name)
}

// screenshots saves the page at laptop, tablet and phone sizes, named
// for what it shows, and gives it its laptop size back. At each, the
// notice of who else is on the console (erin and carol are) shows above
// the console's lines, not over them.
func (p *serialPage) screenshots(t *testing.T, name string) {
	t.Helper()
	for _, size := range []struct {
		name string
		w, h int
	}{{"tablet", 1024, 1366}, {"phone", 390, 844}, {"laptop", 1280, 800}} {
		if err := p.page.SetViewportSize(size.w, size.h); err != nil {
			t.Fatal(err)
		}
		testbrowser.Screenshot(t, p.page, name+"-"+size.name)
		v, err := p.page.Evaluate(noticeOverLines)
		if err != nil {
			t.Fatal(err)
		}
		if over, _ := v.(string); over != "" {
			t.Errorf("alice's serial page at %dx%d: %s; want the notice of who is on her console shown above its lines", size.w, size.h, over)
		}
	}
}

// noticeOverLines is a script saying how the watchers' notice covers
// the console's lines, or that it is hidden; "" when it shows above them.
const noticeOverLines = `() => {
  const n = document.getElementById('watchers'), lines = document.querySelector('.xterm-screen');
  if (n.hidden) return 'the notice of who is on the console is hidden';
  const nb = n.getBoundingClientRect().bottom, lt = lines.getBoundingClientRect().top;
  return nb <= lt + 0.5 ? '' : 'the notice (' + n.textContent + ') covers the console lines from ' + lt + ' px down to ' + nb + ' px';
}`
