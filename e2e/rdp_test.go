package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// rdpColours counts distinct colours in a sample of a PNG: a drawn desktop
// (background, window, text) has many; a blank canvas one or two.
func rdpColours(tb testing.TB, shot []byte) int {
	tb.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		tb.Fatal(err)
	}
	b := img.Bounds()
	seen := map[uint32]bool{}
	for y := b.Min.Y; y < b.Max.Y; y += 7 {
		for x := b.Min.X; x < b.Max.X; x += 7 {
			r, g, bl, _ := img.At(x, y).RGBA()
			seen[r>>8<<16|g>>8<<8|bl>>8] = true
		}
	}
	return len(seen)
}

// rdpSignIn signs in by name and gets a desktop; it returns the member.
func rdpSignIn(t *testing.T, portal *Portal, page playwright.Page, login string) string {
	t.Helper()
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	if _, err := page.Goto(portal.URL + "/"); err != nil {
		t.Fatal(err)
	}
	must(t, page.GetByTestId("login").Fill(login))
	must(t, page.GetByTestId("signin").Click())
	must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText(login))
	must(t, page.Locator(`[data-pool="demo"]`).GetByTestId("get-desktop").Click())
	must(t, page.WaitForURL(regexp.MustCompile(`/desktops/local/demo-\d$`)))
	member := regexp.MustCompile(`demo-\d$`).FindString(page.URL())
	// VNC is a local desktop's first console (freerdp-shadow has no
	// clipboard); RDP is one click away, as "Use RDP" goes.
	if _, err := page.Goto(portal.URL + "/desktops/local/" + member + "?protocol=rdp"); err != nil {
		t.Fatal(err)
	}
	return member
}

// TestRDP_IronRDPDrawsTheDesktop is the RDP console as a user gets it: the
// desktop's first console is RDP, IronRDP in Chromium connects through the
// portal's RDCleanPath gateway to freerdp-shadow on the real desktop with
// the credentials the page shows, draws it, and takes keyboard input: the
// keyboard table's rows and shortcuts, each with the desktop's layout set
// to its own, arrive byte for byte; the Keys menu's Alt+Tab switches the
// desktop's windows.
func TestRDP_IronRDPDrawsTheDesktop(t *testing.T) {
	portal := MustStartPortal(t)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	// IronRDP compiles 6 MB of wasm first: seconds on a busy machine.
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000))
	var consoleLog []string
	page.OnConsole(func(m playwright.ConsoleMessage) { consoleLog = append(consoleLog, m.Type()+": "+m.Text()) })
	page.OnResponse(func(r playwright.Response) {
		if r.Status() >= 400 {
			consoleLog = append(consoleLog, fmt.Sprintf("HTTP %d %s", r.Status(), r.URL()))
		}
	})
	defer func() {
		if t.Failed() {
			t.Logf("browser console:\n%s", strings.Join(consoleLog, "\n"))
		}
	}()

	start := time.Now()
	member := rdpSignIn(t, portal, page, "alice")
	navigated := time.Now()
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	connected := time.Since(navigated)
	must(t, expect.Locator(page.GetByTestId("rdp-credentials")).ToContainText("Sign in as corral, password "))

	desk := page.Locator("iron-remote-desktop")
	var colours int
	var shot []byte
	for end := time.Now().Add(testwait.D(15 * time.Second)); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		b, err := desk.Screenshot()
		must(t, err)
		if shot, colours = b, rdpColours(t, b); colours > 20 {
			break
		}
	}
	firstFrame := time.Since(navigated)
	if colours <= 20 {
		screenshot(t, page, "rdp-blank")
		t.Fatalf("IronRDP drew %d colours in 15s; want the desktop with its terminal (> 20)", colours)
	}
	t.Logf("desktop %s: RDP connected %v and first frame %v after the console page loaded (%v after pressing Get a desktop); %d colours sampled",
		member, connected.Round(time.Millisecond), firstFrame.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), colours)
	if v, err := page.Evaluate(`() => performance.getEntriesByType('measure').map(m => m.name + ' ' + Math.round(m.duration) + 'ms').join(', ')`); err == nil {
		t.Logf("in the page: %v", v)
	}
	dir := filepath.Join("output", t.Name())
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "rdp-canvas.png"), shot, 0o644)
	if img, err := png.Decode(bytes.NewReader(shot)); err == nil {
		t.Logf("canvas screenshot %dx%d", img.Bounds().Dx(), img.Bounds().Dy())
	}
	screenshot(t, page, "rdp-console")

	// The page follows the window: the shadowed desktop keeps its size and
	// the client scales it into the smaller window.
	must(t, page.SetViewportSize(1000, 700))
	time.Sleep(time.Second)
	if b, err := desk.Screenshot(); err != nil || rdpColours(t, b) <= 20 {
		t.Errorf("after a resize the RDP canvas is blank (%v)", err)
	}
	if s, _ := page.GetByTestId("status").TextContent(); s != "Connected" {
		t.Errorf("after a resize the status is %q; want Connected", s)
	}
	screenshot(t, page, "rdp-resized")
	must(t, page.SetViewportSize(1280, 800))
	time.Sleep(500 * time.Millisecond)
	rdpSizeChoices(t, page)

	// Keys typed into the page reach the desktop's shell through IronRDP,
	// the gateway and freerdp-shadow: the shell makes a file.
	box, err := desk.BoundingBox()
	must(t, err)
	// Playwright's Type sends ~ as the Backquote key without pressing Shift
	// and IronRDP sends scan codes, so ~ is typed as a person does: Shift
	// held down with the key.
	marker := filepath.Join(portal.homeOf(member), "corral-rdp-marker")
	typed := func() bool {
		must(t, page.Mouse().Click(box.X+box.Width*200/1280, box.Y+box.Height*200/800))
		must(t, page.Keyboard().Press("Enter"))
		time.Sleep(300 * time.Millisecond)
		must(t, page.Keyboard().Type("touch "))
		must(t, page.Keyboard().Press("Shift+Backquote"))
		must(t, page.Keyboard().Type("/corral-rdp-marker\n"))
		return eventually(3*time.Second, func() bool { _, err := os.Stat(marker); return err == nil })
	}
	//lint:ignore SA4000 typed() types once more each call: a second try
	if !typed() && !typed() {
		screenshot(t, page, "rdp-typed")
		t.Errorf("typing into the RDP console did not create %s", marker)
	}
	time.Sleep(300 * time.Millisecond)
	screenshot(t, page, "rdp-console-typed")

	// freerdp-shadow drops RDP's Unicode keyboard events, so the portal
	// says this console types scan codes, which the desktop's layout (US,
	// and chosen so: Chromium's keyboard here is a US one) makes
	// characters of: Type as keys refuses the rest, naming it, and types
	// the rest.
	openControl(t, page, "clipboard-toggle")
	refusedAsKeys(t, page, "Grüße", "this desktop's English (US) layout", `"ü" (U+00FC), "ß" (U+00DF)`)
	screenshot(t, page, "rdp-type-as-keys-refused")
	pasteAsKeys(t, page, "touch ~/rdp-typed-$((6*7))\n")
	if !eventually(10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(portal.homeOf(member), "rdp-typed-42"))
		return err == nil
	}) {
		t.Errorf("Type as keys on RDP made no rdp-typed-42 in the desktop's home")
	}
	// The desktop made German (setxkbmap) and German chosen in the Keys
	// list: Type as keys presses a German keyboard's keys, AltGr and dead
	// keys included, and the desktop's shell writes the line byte for byte.
	pasteAsKeys(t, page, "setxkbmap de && touch ~/rdp-de-$((6*7))\n")
	if !eventually(10*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(portal.homeOf(member), "rdp-de-42"))
		return err == nil
	}) {
		t.Fatalf("setxkbmap de did not run in the desktop")
	}
	openControl(t, page, "keys-menu")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(15000)).Locator(page.GetByTestId("keys-note")).ToContainText("choose it here for Type as keys"))
	_, err = page.GetByTestId("keys-layout-select").SelectOption(playwright.SelectOptionValues{Values: &[]string{"de"}})
	must(t, err)
	screenshot(t, page, "rdp-keys-layout")
	must(t, page.GetByTestId("keys-menu").Click())
	refusedAsKeys(t, page, "Grüße 日", "this desktop's German layout", `"日" (U+65E5)`)
	const german = "Grüße € @{[]}\\|~ zy ê^`\n"
	pasteAsKeys(t, page, "head -n1 > ~/rdp-de.txt\n"+german)
	waitFile(t, filepath.Join(portal.homeOf(member), "rdp-de.txt"), german)
	// Then every other layout, every character its table has.
	typeXLayouts(t, page, portal.homeOf(member))
	// Each row of the keyboard table as Chromium produces it for its
	// layout, the desktop's layout made that one (setxkbmap, as its user
	// would): IronRDP sends the keys' scan codes, freerdp-shadow presses
	// those keys on the X server, and its layout makes the characters.
	// The commands are typed with Type as keys, the desktop's layout and
	// the chosen one English (US) meanwhile (xDesk.listen).
	chooseLayout(t, page, "us")
	x := xDesk{page: page, shell: openGuestShell(t, portal, "alice", member), home: portal.homeOf(member), scanCodes: true}
	t.Run("keyboard layouts", func(t *testing.T) { typeLayouts(t, page, x) })
	t.Run("shortcuts", func(t *testing.T) { typeShortcuts(t, page, x) })
	x.shell.run("setxkbmap us")
	t.Run("keys menu: Alt+Tab switches windows", func(t *testing.T) { altTabFromKeys(t, page, x.shell) })
	composeIntoRDP(t, page, desk, portal.homeOf(member))

	// The session is recorded as an RDP session of alice.
	if !strings.Contains(portal.Log(), `protocol=rdp`) {
		t.Errorf("portal log has no RDP session")
	}
}

// composeIntoRDP plays an input method on the RDP console (ime.js), the
// desktop's layout and the one chosen US: its word goes as that layout's
// keys, a word the layout cannot type is refused over the screen, and a
// key pressed after them still reaches the desktop through IronRDP.
func composeIntoRDP(t *testing.T, page playwright.Page, desk playwright.Locator, home string) {
	t.Helper()
	pasteAsKeys(t, page, "head -n1 > $HOME/rdp-ime.txt\n")
	box, err := desk.BoundingBox()
	must(t, err)
	must(t, page.Mouse().Click(box.X+box.Width*200/1280, box.Y+box.Height*200/800))
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(desk.Locator("textarea")).ToBeFocused())
	in := newDevInput(t, page)
	in.compose([]string{"h", "he", "hel"}, "hello")
	in.compose([]string{"日"}, "日本")
	in.strokes(plain("KeyX", "x"))
	in.enter()
	waitFile(t, filepath.Join(home, "rdp-ime.txt"), "hellox\n")
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(5000)).Locator(page.GetByTestId("console-keys-note")).
		ToHaveText(`Not typed: this desktop's English (US) layout cannot type "日" (U+65E5), "本" (U+672C).`))
	for _, v := range [][2]int{{1280, 800}, {1024, 1366}, {390, 844}} {
		must(t, page.SetViewportSize(v[0], v[1]))
		screenshot(t, page, fmt.Sprintf("rdp-ime-refused-%dx%d", v[0], v[1]))
	}
}

// TestRDP_WrongPassword: a holder who types a wrong password reads so.
func TestRDP_WrongPassword(t *testing.T) {
	portal := MustStartPortal(t)
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	// IronRDP compiles 6 MB of wasm first: seconds on a busy machine.
	expect := playwright.NewPlaywrightAssertions(testwait.MS(45000))
	var consoleLog []string
	page.OnConsole(func(m playwright.ConsoleMessage) { consoleLog = append(consoleLog, m.Type()+": "+m.Text()) })
	defer func() {
		if t.Failed() {
			t.Logf("browser console:\n%s", strings.Join(consoleLog, "\n"))
		}
	}()
	// The page is told a wrong password, as if the holder had mistyped it;
	// later a forged token.
	var forge atomic.Bool
	must(t, page.Route("**/api/vdi/desktops/*/*/connect*", func(r playwright.Route) {
		res, err := r.Fetch()
		if err != nil {
			r.Abort()
			return
		}
		var body map[string]any
		b, _ := res.Body()
		json.Unmarshal(b, &body)
		if c, ok := body["credentials"].(map[string]any); ok && !forge.Load() {
			c["password"] = "not-the-password"
		}
		if tok, ok := body["token"].(string); ok && forge.Load() {
			body["token"] = "x" + tok
		}
		b, _ = json.Marshal(body)
		r.Fulfill(playwright.RouteFulfillOptions{Response: res, Body: b})
	}))
	rdpSignIn(t, portal, page, "bob")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Wrong user name or password."))
	must(t, expect.Locator(page.GetByTestId("rdp-password")).ToBeVisible())
	screenshot(t, page, "rdp-wrong-password")
	if !strings.Contains(portal.Log(), "wrong user name or password") {
		t.Errorf("portal log does not record the refused sign-in")
	}

	// A token the portal did not mint is refused by the gateway with an
	// RDCleanPath error, which the page explains.
	forge.Store(true)
	must(t, page.GetByTestId("reconnect").Click())
	must(t, expect.Locator(page.GetByTestId("status")).ToContainText("the token is not valid"))
	screenshot(t, page, "rdp-forged-token")
}

// rdpSizeChoices drives the Size choice on an RDP console whose server
// keeps its size (freerdp-shadow): the list says so and that a fixed size
// scales instead, Actual size shows the session unscaled, and Fit scales it into
// the window again (the desktop, 800 px high, into a shorter screen).
func rdpSizeChoices(t *testing.T, page playwright.Page) {
	t.Helper()
	keepsItsSize(t, page, "rdp-size-list")
	// The canvas's width on the page over its width in pixels.
	scale := func() float64 {
		v, err := page.Evaluate(`() => { const c = document.querySelector('iron-remote-desktop').shadowRoot.querySelector('canvas');
			return c.getBoundingClientRect().width / c.width; }`)
		must(t, err)
		return toFloat(v)
	}
	var got float64
	chooseSize(t, page, "actual")
	if !eventually(10*time.Second, func() bool { got = scale(); return got > 0.99 && got < 1.01 }) {
		t.Errorf("RDP at Actual size: the canvas is shown at %.3f of its size; want 1", got)
	}
	screenshot(t, page, "rdp-size-actual")
	// Every shape the canvas is shown in from here on: a server that
	// keeps its size is scaled, never stretched to a size it was asked.
	_, err := page.Evaluate(`() => { const c = document.querySelector('iron-remote-desktop').shadowRoot.querySelector('canvas');
		window.shapes = [];
		const o = new ResizeObserver(() => { const r = c.getBoundingClientRect(); window.shapes.push([r.width, r.height, c.width, c.height]); });
		o.observe(c);
		window.shapesStop = () => o.disconnect(); }`)
	must(t, err)
	chooseSize(t, page, "fit")
	if !eventually(10*time.Second, func() bool { got = scale(); return got < 0.98 }) {
		t.Errorf("RDP at Fit: the canvas is shown at %.3f of its size; want it scaled into the window", got)
	}
	v, err := page.Evaluate(`() => { window.shapesStop();
		return window.shapes.filter(([w, h, cw, ch]) => Math.abs(w / h - cw / ch) > 0.01).map((s) => s.join(' ')).join('; '); }`)
	must(t, err)
	if bad, _ := v.(string); bad != "" {
		t.Errorf("RDP at Fit: the session was shown out of shape (shown w h, canvas w h): %s", bad)
	}
	if s, _ := page.GetByTestId("status").TextContent(); s != "Connected" {
		t.Errorf("after the Size choices the status is %q; want Connected", s)
	}
}
