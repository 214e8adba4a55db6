package e2e

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestConsoleUX_WatchedUserSeesTheWatcher: while an admin watches alice's
// desktop (the dashboard's live view), alice's console says who, within
// 2 s, and the notice goes when the admin leaves.
func TestConsoleUX_WatchedUserSeesTheWatcher(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	d := mustClaim(t, p, "alice", "demo")
	for _, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			must(t, expect.Locator(page.GetByTestId("watch-notice")).ToBeHidden())
			before := settledDesktopSize(t, page)
			admin := b.MustNewPage(t, 1280, 800)
			signIn(t, admin, p, "boss", "/admin/shadow/local/"+d.Name)
			must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText("Connected"))
			watching := time.Now()
			must(t, playwright.NewPlaywrightAssertions(testwait.MS(2000)).Locator(page.GetByTestId("watch-notice")).ToContainText("boss is watching this desktop (view only)."))
			t.Logf("the notice showed %v after the admin's view connected", time.Since(watching).Round(time.Millisecond))
			screenshot(t, page, "watched")
			// The notice lies over the desktop: it never resizes it (a resize
			// as a viewer joins also makes Xvnc close that viewer).
			time.Sleep(1500 * time.Millisecond) // noVNC asks for a new size 0.5 s after the layout changes
			if after := desktopSizeOf(t, page); after != before {
				t.Errorf("the holder's desktop went from %s to %s when the watch began; want it left alone", before, after)
			}
			must(t, admin.Close())
			must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(page.GetByTestId("watch-notice")).ToBeHidden())
			must(t, page.Close())
		})
	}
	// An admin who only listens (the pool's watch is notify, its sound on)
	// shows in the notice too, and goes from it when the sound closes.
	t.Run("listener", func(t *testing.T) {
		page := b.MustNewPage(t, 1280, 800)
		signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		must(t, expect.Locator(page.GetByTestId("audio-toggle")).ToBeVisible()) // the desktop's sound is up
		h := http.Header{"Tailscale-User-Login": {"boss"}, "Origin": {p.URL}}
		ws, res, err := websocket.DefaultDialer.Dial(strings.Replace(p.URL, "http", "ws", 1)+"/ws/audio/local/"+d.Name, h)
		if err != nil {
			t.Fatalf("the admin's sound: %v %v", res, err)
		}
		defer ws.Close()
		must(t, expect.Locator(page.GetByTestId("watch-notice")).ToContainText("boss is listening to its sound."))
		screenshot(t, page, "listened")
		ws.Close()
		must(t, expect.Locator(page.GetByTestId("watch-notice")).ToBeHidden())
	})
	// An admin who opens alice's desktop on the console page is beside her,
	// view only: his page shows no controls that would type (Keys,
	// Clipboard, the on-screen keyboard, where keys go), and its Release
	// says it force-releases hers.
	for _, s := range []struct {
		name          string
		width, height int
		touch         bool
	}{{"laptop", 1280, 800, false}, {"tablet", 1024, 1366, true}, {"phone", 390, 844, true}} {
		t.Run("admin-console-"+s.name, func(t *testing.T) {
			page := b.MustNewPage(t, 1280, 800)
			defer page.Close()
			signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			admin := uxPage(t, b, s.width, s.height, s.touch)
			defer admin.Close()
			signIn(t, admin, p, "boss", "/desktops/local/"+d.Name)
			must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText("Connected"))
			must(t, expect.Locator(admin.GetByTestId("watch-notice")).ToHaveText("On it: alice (holder), boss (you, view only)"))
			must(t, expect.Locator(page.GetByTestId("watch-notice")).ToContainText("boss is watching this desktop (view only)."))
			for _, id := range []string{"keys-menu", "clipboard-toggle", "onscreen-keyboard", "typing"} {
				must(t, expect.Locator(admin.GetByTestId(id)).ToBeHidden())
			}
			screenshot(t, admin, "admin-console-beside")
			// Through the Menu where the bar folds (a phone's), however
			// the bar folds or unfolds meanwhile.
			must(t, expect.Locator(admin.GetByTestId("release")).ToHaveText("Release alice's desktop"))
			openControl(t, admin, "release")
			must(t, expect.Locator(admin.GetByTestId("confirm-dialog")).ToContainText("Force-release alice's desktop "+d.Name+"?"))
			screenshot(t, admin, "admin-console-release")
			must(t, admin.GetByTestId("confirm-no").Click())
		})
	}
}

// TestConsoleUX_WatchPolicy: a pool with watch "consent" makes an admin's
// watch wait until the holder allows it on their console (refused, the
// admin reads so); with "off" the admin's console is refused outright.
func TestConsoleUX_WatchPolicy(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	for _, body := range []string{
		`{"name": "helped", "size": 1, "policy": {"watch": "consent"}}`,
		`{"name": "private", "size": 1, "policy": {"watch": "off"}}`,
	} {
		if code := p.APIBody(t, "boss", "POST", "/api/vdi/pools", body, nil); code != 201 {
			t.Fatalf("create pool %s: %d", body, code)
		}
	}
	if code := p.APIBody(t, "boss", "POST", "/api/vdi/pools", `{"name": "bad", "size": 1, "policy": {"watch": "always"}}`, nil); code != 400 {
		t.Errorf("a pool with watch \"always\": %d; want 400", code)
	}
	var helped, private desktop
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/helped/claim", &helped); code != 200 {
		t.Fatalf("claim helped: %d", code)
	}
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/private/claim", &private); code != 200 {
		t.Fatalf("claim private: %d", code)
	}
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/desktops/local/"+helped.Name)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	for _, answer := range []string{"refuse", "allow"} {
		t.Run(answer, func(t *testing.T) {
			admin := b.MustNewPage(t, 1280, 800)
			defer admin.Close()
			signIn(t, admin, p, "boss", "/admin/shadow/local/"+helped.Name)
			ask := page.GetByTestId("watch-ask")
			must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(ask).ToHaveCount(1))
			must(t, expect.Locator(ask).ToContainText("boss asks to watch this desktop (view only)."))
			screenshot(t, page, "asks")
			if s, _ := admin.GetByTestId("status").TextContent(); s == "Connected" {
				t.Fatal("the admin's watch connected before alice answered")
			}
			// Item 8 of issue 58: the admin reads what the wait is for, and how long.
			must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText(regexp.MustCompile(`^Waiting for alice to allow \(\d+ s\)…$`)))
			screenshot(t, admin, "admin-waits")
			// Past the portal's first ping of the waiting socket (every
			// 2 s): the browser's pong waits unread when the answer comes.
			time.Sleep(2500 * time.Millisecond)
			must(t, page.GetByTestId("watch-"+answer).Click())
			if answer == "refuse" {
				must(t, expect.Locator(admin.GetByTestId("status")).ToContainText("alice did not allow the watch"))
				must(t, expect.Locator(page.GetByTestId("watch-notice")).ToBeHidden())
				return
			}
			must(t, expect.Locator(admin.GetByTestId("status")).ToHaveText("Connected"))
			must(t, expect.Locator(page.GetByTestId("watch-notice")).ToContainText("boss is watching this desktop (view only)."))
		})
	}
	ws, res, err := dialWS(p, "boss", "/ws/vnc/local/"+private.Name, p.URL)
	if err == nil {
		ws.Close()
		t.Fatal("an admin opened a console of a pool whose watch policy is off")
	}
	if res == nil || res.StatusCode != 403 {
		t.Errorf("watching a watch-off pool's desktop: %v; want 403", status(res))
	}
	// RDP too (its consent is TestRDPWatch_Consent's).
	ws, res, err = dialWS(p, "boss", "/ws/rdp/local/"+private.Name, p.URL)
	if err == nil {
		ws.Close()
		t.Error("an admin opened the RDP console of a pool whose watch policy is off")
	} else if res == nil || res.StatusCode != 403 {
		t.Errorf("RDP of a watch-off pool's desktop by an admin: %v; want 403", status(res))
	}
}
