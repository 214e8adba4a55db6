package e2e

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// Issue 32: the console a user gets by default, and a console page that
// never looks broken, at a laptop's, a tablet's and a phone's size.

// uxSizes are the screens every console UX test is run at.
var uxSizes = []struct {
	name          string
	width, height int
	touch         bool
}{{"laptop", 1280, 800, false}, {"tablet", 768, 1024, true}, {"phone", 390, 844, true}}

// uxPage opens a page of size s (a touch device for tablets and phones).
func uxPage(t *testing.T, b *Browser, width, height int, touch bool) playwright.Page {
	t.Helper()
	if touch {
		return b.MustNewPhonePage(t, width, height)
	}
	return b.MustNewPage(t, width, height)
}

// openControl clicks a console control, through the Menu where the screen
// folds the controls into one.
//
// The bar folds and unfolds as what it shows changes (a status's words:
// fold.js), also between a look and a click, so it looks again until the
// control is clicked.
func openControl(t *testing.T, page playwright.Page, testid string) {
	t.Helper()
	short := playwright.LocatorClickOptions{Timeout: playwright.Float(testwait.MS(2000))}
	for end := time.Now().Add(testwait.D(20 * time.Second)); ; {
		if v, _ := page.GetByTestId(testid).IsVisible(); v {
			if page.GetByTestId(testid).Click(short) == nil {
				return
			}
		} else if v, _ := page.GetByTestId("console-menu").IsVisible(); v {
			if open, _ := page.GetByTestId("console-controls").GetAttribute("data-open"); open != "true" {
				page.GetByTestId("console-menu").Click(short)
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s is not on screen, in the console bar or its menu, after 20 s", testid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openMenu opens the folded bar's Menu and reports whether the bar is
// folded: an unfolded bar has its controls in it and nothing to open. The
// bar may unfold between a look and a click (a scaled desktop's Zoom
// button goes once the desktop has the window's size), which hides the
// Menu's button, so it looks again until the Menu is open or the bar is
// unfolded.
func openMenu(t *testing.T, page playwright.Page) bool {
	t.Helper()
	short := playwright.LocatorClickOptions{Timeout: playwright.Float(testwait.MS(2000))}
	for end := time.Now().Add(testwait.D(20 * time.Second)); ; {
		if v, _ := page.GetByTestId("console-menu").IsVisible(); !v {
			return false
		}
		if open, _ := page.GetByTestId("console-controls").GetAttribute("data-open"); open == "true" {
			return true
		}
		page.GetByTestId("console-menu").Click(short)
		if time.Now().After(end) {
			t.Fatal("the folded console bar's Menu did not open in 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// closeMenu closes the folded bar's Menu if it is open. The bar may
// unfold meanwhile (a scaled desktop's Zoom button goes once the desktop
// has the window's size), which closes the Menu and hides its button:
// then there is nothing left to close.
func closeMenu(t *testing.T, page playwright.Page) {
	t.Helper()
	short := playwright.LocatorClickOptions{Timeout: playwright.Float(testwait.MS(2000))}
	for end := time.Now().Add(testwait.D(20 * time.Second)); ; {
		open, _ := page.GetByTestId("console-controls").GetAttribute("data-open")
		if open != "true" {
			return
		}
		if v, _ := page.GetByTestId("console-menu").IsVisible(); !v {
			return // unfolded: its controls are in the bar
		}
		if page.GetByTestId("console-menu").Click(short) == nil {
			return
		}
		if time.Now().After(end) {
			t.Fatal("the console's Menu is still open after 20 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// noObjectObject fails when the page shows "[object Object]" anywhere.
func noObjectObject(t *testing.T, page playwright.Page) {
	t.Helper()
	v, err := page.Evaluate(`() => document.body.innerText + [...document.querySelectorAll('[title]')].map((e) => e.title).join(' ')`)
	must(t, err)
	if s, _ := v.(string); strings.Contains(s, "[object Object]") {
		t.Errorf("the page shows [object Object]: %q", s)
	}
}

// box is the element's box on the page.
func box(t *testing.T, l playwright.Locator) *playwright.Rect {
	t.Helper()
	b, err := l.BoundingBox()
	must(t, err)
	return b
}

// barHeight is the console bar's height in CSS px.
func barHeight(t *testing.T, page playwright.Page) float64 {
	t.Helper()
	v, err := page.Evaluate(`() => document.querySelector('.console-bar').getBoundingClientRect().height`)
	must(t, err)
	return toFloat(v)
}

// zoomOfferInBar waits for "Zoom 1:1" and fails unless it lies in the
// page's bar, within its width, off the desktop's screen: at fit the
// desktop fills a phone's screen, and over it the offer hid its corner.
func zoomOfferInBar(t *testing.T, page playwright.Page, width int) {
	t.Helper()
	offer := page.GetByTestId("zoom-actual")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(20000)).Locator(offer).ToBeVisible())
	if a, d := box(t, offer), box(t, page.Locator("#screen")); a.Y < d.Y+d.Height && d.Y < a.Y+a.Height && a.X < d.X+d.Width && d.X < a.X+a.Width {
		t.Errorf("Zoom 1:1 at %+v lies over the desktop's screen at %+v; want it off the desktop", *a, *d)
	}
	if n, err := page.Locator(".console-bar").GetByTestId("zoom-actual").Count(); err != nil || n != 1 {
		t.Errorf("Zoom 1:1 is not in the page's bar (%v)", err)
	}
	inViewport(t, page, offer, "Zoom 1:1", width)
}

// TestConsoleUX_DefaultConsoleHasAClipboard: "Get a desktop" on the home
// page opens the console whose clipboard works (VNC: the desktop's RDP
// server, freerdp-shadow, has none), at every size: Send to desktop puts
// the text on the desktop's clipboard (read back with xclip inside it),
// nothing says [object Object], the header stays one line, and a phone
// gets a desktop at least 1024 px wide (logical), shown whole, with a 1:1
// zoom offered.
func TestConsoleUX_DefaultConsoleHasAClipboard(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=3")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	for i, s := range uxSizes {
		t.Run(s.name, func(t *testing.T) {
			user := "user" + strconv.Itoa(i)
			page := uxPage(t, b, s.width, s.height, s.touch)
			signIn(t, page, p, user, "/")
			must(t, page.Locator(`[data-pool="demo"]`).GetByTestId("get-desktop").Click())
			must(t, page.WaitForURL(regexp.MustCompile(`/desktops/local/demo-\d$`)))
			member := regexp.MustCompile(`demo-\d$`).FindString(page.URL())
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			if n, _ := page.Locator("#screen iron-remote-desktop").Count(); n != 0 {
				t.Fatal("the default console is RDP; want VNC (freerdp-shadow has no clipboard)")
			}
			must(t, expect.Locator(page.Locator("#screen canvas")).ToBeVisible())
			// The page asks /connect not at all: it opens VNC, whose
			// answer came with the page (TestConsole_PageCarriesItsVNCAnswer).
			if v, err := page.Evaluate(`() => performance.getEntriesByType('resource').filter((e) => /\/connect(\?|$)/.test(e.name)).length`); err != nil || toInt(v) != 0 {
				t.Errorf("the console page asked /connect %v times (%v); want none", v, err)
			}
			if h := barHeight(t, page); h > 60 {
				t.Errorf("the console bar is %.0f px high: it wrapped", h)
			}
			must(t, expect.Locator(page.GetByTestId("connection-chip")).ToBeVisible())
			must(t, expect.Locator(page.GetByTestId("chip-details")).ToHaveText(regexp.MustCompile(`^direct · \d+ ms · \d+ updates/s(\. Slow: .*)?$`))) // slow on a loaded machine
			if kb, _ := page.GetByTestId("onscreen-keyboard").IsHidden(); kb == s.touch && s.width > 900 {
				t.Errorf("the Keyboard button hidden = %v on a touch = %v device", kb, s.touch)
			}
			shell := openGuestShell(t, p, user, member)
			if s.width < 1024 {
				var dims string
				if !eventually(15*time.Second, func() bool {
					dims = shell.dimensions()
					w, _ := strconv.Atoi(strings.Split(dims+"x", "x")[0])
					return w >= 1024
				}) {
					t.Errorf("on a %d px screen the desktop is %s; want at least 1024 wide", s.width, dims)
				}
				t.Logf("%dx%d screen: the desktop is %s", s.width, s.height, dims)
				zoomOfferInBar(t, page, s.width)
				screenshot(t, page, "fit")
				must(t, page.GetByTestId("zoom-actual").Click())
				must(t, expect.Locator(page.GetByTestId("zoom-fit")).ToBeVisible())
				screenshot(t, page, "zoom-1to1")
				must(t, page.GetByTestId("zoom-fit").Click())
			}
			openControl(t, page, "clipboard-toggle")
			must(t, expect.Locator(page.GetByTestId("clipboard-panel")).ToBeVisible())
			text := "round trip " + s.name + " ✓"
			must(t, page.GetByTestId("clipboard-text").Fill(text))
			must(t, page.GetByTestId("clipboard-send").Click())
			must(t, expect.Locator(page.GetByTestId("clipboard-note")).ToContainText("Sent"))
			var got string
			if !eventually(10*time.Second, func() bool { got = shell.clipboard(); return strings.Contains(got, "<<"+text+">>") }) {
				t.Errorf("the desktop's clipboard shows %q; want %q", got, text)
			}
			noObjectObject(t, page)
			if s.name == "laptop" {
				docShot(t, page, "console-clipboard")
			} else {
				screenshot(t, page, "clipboard-sent")
			}
		})
	}
}

// TestConsoleUX_RDPSaysItHasNoClipboard: on RDP (one click away) the panel
// says freerdp-shadow has no clipboard and offers VNC, never
// [object Object]; the sign-in banner goes once signed in.
func TestConsoleUX_RDPSaysItHasNoClipboard(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000)) // IronRDP compiles its wasm first
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, page.GetByTestId("fallback-rdp").Click())
	must(t, page.WaitForURL(regexp.MustCompile(`\?protocol=rdp$`)))
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(page.GetByTestId("rdp-signin")).ToBeHidden())
	must(t, page.GetByTestId("clipboard-toggle").Click())
	must(t, expect.Locator(page.GetByTestId("clipboard-note")).ToContainText("no clipboard"))
	must(t, expect.Locator(page.GetByTestId("clipboard-better")).ToHaveText("Use VNC"))
	must(t, expect.Locator(page.GetByTestId("clipboard-send")).ToBeDisabled())
	noObjectObject(t, page)
	screenshot(t, page, "rdp-clipboard")
	// What a refused send says of IronRDP's error objects (which have no
	// message, only kind() and backtrace()), of an Error and of nothing:
	// reason() of the page's clipboard.js, imported from static/app/ (the
	// page runs it bundled), beside the page's icon there.
	v, err := page.Evaluate(`async () => {
	  const icon = document.querySelector('link[rel=icon][href$="/favicon.svg"]');
	  const m = await import(icon.href.replace(/favicon\.svg$/, 'clipboard.js'));
	  return [m.reason({ kind: () => 1, backtrace: () => 'clipboard channel not open\n    at wasm' }), m.reason(new Error('denied.')), m.reason({}), m.reason('[object Object]')].join('|');
	}`)
	must(t, err)
	if got, want := v.(string), "clipboard channel not open|denied|the console refused it|the console refused it"; got != want {
		t.Errorf("reason() = %q; want %q", got, want)
	}
}

// TestConsoleUX_FullScreenMenuByKeyboard: full screen, then Ctrl+Alt+Shift
// opens the menu over the desktop with its first control focused; Tab
// reaches Release, Enter asks in the page, and confirming releases and
// lands on the home page's notice, all from the keyboard.
func TestConsoleUX_FullScreenMenuByKeyboard(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, page.GetByTestId("fullscreen").Focus())
	must(t, page.Keyboard().Press("Enter"))
	must(t, expect.Locator(page.Locator("body")).ToHaveAttribute("data-fullscreen", "true"))
	must(t, expect.Locator(page.GetByTestId("fullscreen-hint")).ToBeVisible())
	must(t, expect.Locator(page.GetByTestId("console-controls")).ToBeHidden())
	screenshot(t, page, "fullscreen-hint")
	must(t, page.Locator("#screen canvas").Click()) // typing into the desktop, as a user does
	must(t, page.Keyboard().Press("Control+Alt+Shift"))
	must(t, expect.Locator(page.GetByTestId("release")).ToBeVisible())
	focused := func() string {
		v, _ := page.Evaluate(`() => document.activeElement?.dataset?.testid || document.activeElement?.id || ''`)
		s, _ := v.(string)
		return s
	}
	if f := focused(); f == "" || f == "screen" {
		t.Fatalf("after Ctrl+Alt+Shift the focus is on %q; want the menu's first control", f)
	}
	screenshot(t, page, "fullscreen-menu")
	for i := 0; i < 20 && focused() != "release"; i++ {
		must(t, page.Keyboard().Press("Tab"))
	}
	if f := focused(); f != "release" {
		t.Fatalf("Tab never reached Release (focus on %q)", f)
	}
	must(t, page.Keyboard().Press("Enter"))
	must(t, expect.Locator(page.GetByTestId("confirm-dialog")).ToBeVisible())
	screenshot(t, page, "release-confirm")
	if f := focused(); f != "confirm-no" {
		t.Errorf("the confirmation opens with the focus on %q; want Cancel (the safe answer)", f)
	}
	must(t, page.Keyboard().Press("Shift+Tab"))
	must(t, page.Keyboard().Press("Enter"))
	must(t, page.WaitForURL(regexp.MustCompile(`/\?notice=released`)))
	must(t, expect.Locator(page.GetByTestId("notice")).ToContainText("Released local/"+d.Name))
	screenshot(t, page, "released-notice")
	var mine []desktop
	p.API(t, "alice", "GET", "/api/vdi/desktops", &mine)
	if len(mine) != 0 {
		t.Errorf("alice still holds %d desktops after Release", len(mine))
	}
	// Her own history lists the session, and why it ended.
	must(t, page.GetByTestId("my-history-link").Click())
	row := page.GetByTestId("my-session").First()
	must(t, expect.Locator(row).ToContainText("local/"+d.Name))
	must(t, expect.Locator(row).ToContainText("vnc · direct"))
	must(t, expect.Locator(row).ToContainText("released"))
	screenshot(t, page, "my-sessions")
}

// TestConsoleUX_EndedCard: a console that ends shows one card with the
// reason in words and the one action that helps, the controls that no
// longer apply go, and the header stays one line: taken over by another
// tab (Use it here), released by an admin (Back to my desktops), and the
// portal unreachable (Reconnect now, counting down). At every size.
func TestConsoleUX_EndedCard(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=4", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(20000))
	pages := make([]playwright.Page, len(uxSizes))
	members := make([]string, len(uxSizes))
	for i, s := range uxSizes {
		user := "user" + strconv.Itoa(i)
		var d desktop
		if code := p.API(t, user, "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 {
			t.Fatalf("claim: %d", code)
		}
		members[i] = d.Name
		pages[i] = uxPage(t, b, s.width, s.height, s.touch)
		signIn(t, pages[i], p, user, "/desktops/local/"+d.Name)
		must(t, expect.Locator(pages[i].GetByTestId("status")).ToHaveText("Connected"))
	}
	card := func(page playwright.Page, title, action string) {
		t.Helper()
		must(t, expect.Locator(page.GetByTestId("ended")).ToBeVisible())
		must(t, expect.Locator(page.GetByTestId("ended-title")).ToHaveText(title))
		must(t, expect.Locator(page.GetByTestId(action)).ToBeVisible())
		must(t, expect.Locator(page.GetByTestId("clipboard-toggle")).ToBeHidden())
		must(t, expect.Locator(page.GetByTestId("keys-menu")).ToBeHidden())
		noObjectObject(t, page)
		if h := barHeight(t, page); h > 60 {
			t.Errorf("the console bar is %.0f px high: it wrapped", h)
		}
	}
	for i, s := range uxSizes {
		t.Run("taken over/"+s.name, func(t *testing.T) {
			second, err := pages[i].Context().NewPage()
			must(t, err)
			defer second.Close()
			_, err = second.Goto(p.URL + "/desktops/local/" + members[i])
			must(t, err)
			must(t, expect.Locator(second.GetByTestId("status")).ToHaveText("Connected"))
			card(pages[i], "Opened in another tab or window", "reconnect")
			must(t, expect.Locator(pages[i].GetByTestId("ended-reason")).ToHaveText("This desktop was opened in another tab or window."))
			// The header says it as a sentence too, not "taken over: this desktop…".
			must(t, expect.Locator(pages[i].GetByTestId("status")).ToHaveText("This desktop was opened in another tab or window."))
			screenshot(t, pages[i], "taken-over")
			must(t, pages[i].GetByTestId("reconnect").Click())
			must(t, expect.Locator(pages[i].GetByTestId("status")).ToHaveText("Connected"))
			must(t, expect.Locator(pages[i].GetByTestId("ended")).ToBeHidden())
		})
	}
	for i, s := range uxSizes {
		t.Run("released/"+s.name, func(t *testing.T) {
			if code := p.APIBody(t, "boss", "POST", "/api/vdi/desktops/local/"+members[i]+"/release", `{"reason":"end of term"}`, nil); code != 200 {
				t.Fatalf("force-release: %d", code)
			}
			card(pages[i], "This desktop is no longer yours", "home")
			must(t, expect.Locator(pages[i].GetByTestId("ended-reason")).ToHaveText("An admin (boss) released this desktop. Reason: end of term."))
			must(t, expect.Locator(pages[i].GetByTestId("reconnect")).ToBeHidden())
			must(t, expect.Locator(pages[i].GetByTestId("release")).ToBeHidden())
			screenshot(t, pages[i], "released")
		})
	}
	// Issue 58: a persistent desktop released by its holder (from another
	// tab) stops; its console hears why before the desktop goes, so it
	// says it was released, not that it is stopped with a Start that can
	// only fail.
	t.Run("released by its holder", func(t *testing.T) {
		if code := p.APIBody(t, "boss", "POST", "/api/vdi/pools", `{"name":"keep","mode":"persistent","size":1}`, nil); code != 200 && code != 201 {
			t.Fatalf("creating a persistent pool: %d", code)
		}
		page, d := MustOpenConsole(t, b, p, "user8", "keep", 1280, 800, false)
		if code := p.API(t, "user8", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
			t.Fatalf("release: %d", code)
		}
		card(page, "This desktop is no longer yours", "home")
		must(t, expect.Locator(page.GetByTestId("ended-reason")).ToHaveText("The desktop was released."))
		must(t, expect.Locator(page.GetByTestId("start-again")).ToBeHidden())
		screenshot(t, page, "released-by-holder")
	})
	t.Run("unreachable", func(t *testing.T) {
		d := mustClaim(t, p, "user9", "demo")
		page := uxPage(t, b, 1280, 800, false)
		signIn(t, page, p, "user9", "/desktops/local/"+d.Name)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		p.Stop(t) // the portal goes away with the console open
		card(page, "Connection lost", "reconnect")
		must(t, expect.Locator(page.GetByTestId("ended-reason")).ToContainText("Reconnecting in"))
		must(t, expect.Locator(page.GetByTestId("reconnect")).ToHaveText("Reconnect now"))
		screenshot(t, page, "unreachable")
	})
}

// settledDesktopSize waits until the desktop has taken the page's size
// (it keeps the last console's until noVNC's resize is answered) and
// returns it.
func settledDesktopSize(t *testing.T, page playwright.Page) string {
	t.Helper()
	last := desktopSizeOf(t, page)
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); {
		time.Sleep(time.Second)
		now := desktopSizeOf(t, page)
		if now == last && now != "" {
			return now
		}
		last = now
	}
	t.Fatalf("the desktop's size did not settle: last %s", last)
	return ""
}

// desktopSizeOf is the size of the desktop a VNC console page shows, as
// "WxH" of noVNC's canvas.
func desktopSizeOf(t *testing.T, page playwright.Page) string {
	t.Helper()
	v, err := page.Evaluate(`() => { const c = document.querySelector('#screen canvas'); return c ? c.width + 'x' + c.height : ''; }`)
	must(t, err)
	return fmt.Sprint(v)
}
