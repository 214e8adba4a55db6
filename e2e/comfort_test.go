package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestComfort_VNC drives a local desktop's VNC console: the clipboard
// panel's text reaches the desktop's clipboard and what the desktop copies
// shows in the panel; paste-as-keys types into the desktop's terminal
// window, refuses what it cannot type and caps the length; the keys menu's
// Ctrl+Alt+Del reaches the X server and its Alt+Tab switches windows; the
// desktop follows the window's size, or the one the Size choice names
// (comfort_size_test.go); and with the pool's clipboard off the relay
// drops both ways and logs it, even for a page that ignores the policy.
func TestComfort_VNC(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1024, 700)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	shell := openGuestShell(t, p, "alice", d.Name)

	t.Run("the desktop takes the window's size", func(t *testing.T) {
		for _, size := range [][2]int{{1024, 700}, {1200, 820}} {
			must(t, page.SetViewportSize(size[0], size[1]))
			want, got := "", ""
			// Within a pixel or two: the server may round odd sizes.
			if !eventually(10*time.Second, func() bool {
				want, got = screenSize(t, page), shell.dimensions()
				return near(got, want, 2)
			}) {
				t.Errorf("window %dx%d: xdpyinfo says %s; want the console's %s", size[0], size[1], got, want)
			}
			t.Logf("window %dx%d: the X screen is %s", size[0], size[1], got)
		}
	})

	t.Run("size", func(t *testing.T) {
		sizeChoices(t, p, b, page, shell, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	})
	t.Run("screens", func(t *testing.T) { twoScreens(t, page, shell) })

	must(t, page.GetByTestId("clipboard-toggle").Click())
	must(t, expect.Locator(page.GetByTestId("clipboard-panel")).ToBeVisible())

	t.Run("panel to desktop", func(t *testing.T) {
		text := "from the panel: ünïcode ✓ 42"
		must(t, page.GetByTestId("clipboard-text").Fill(text))
		must(t, page.GetByTestId("clipboard-send").Click())
		var got string
		if !eventually(10*time.Second, func() bool { got = shell.clipboard(); return strings.Contains(got, "<<"+text+">>") }) {
			t.Errorf("the desktop's clipboard shows %q; want %q", got, text)
		}
	})

	t.Run("desktop to panel", func(t *testing.T) {
		shell.run("printf 'copied in the desktop: ✓ %s' $((6*7)) | xclip -i -selection clipboard")
		must(t, expect.Locator(page.GetByTestId("clipboard-text")).ToHaveValue("copied in the desktop: ✓ 42"))
		screenshot(t, page, "clipboard-panel")
	})
	t.Run("while the box has the focus", func(t *testing.T) { clipboardWhileTyping(t, page, shell) })
	t.Run("pictures both ways", func(t *testing.T) { clipboardPictures(t, page, shell) })

	t.Run("a desktop that floods or sends a huge clipboard", func(t *testing.T) {
		// 120 clipboard changes as fast as xclip goes: the relay lets a
		// burst through, drops the rest, and once the desktop is quiet
		// tells the page of the last, which the panel then shows.
		// The limit (20 at once, then 5 a second) makes 120 changes a
		// flood only within 20 s; xclip programs took 70 to 300 ms each
		// on loaded machines, so the drop is required only when the
		// desktop was that fast (relay's
		// TestFilterRFBClipboard_BadInput/flood drives the limit on a
		// clock of its own).
		const changes = 120
		shell := shell.within(t, 2*time.Minute)
		start := time.Now()
		shell.run(fmt.Sprintf("for i in $(seq %d); do echo flood-$i | xclip -i -selection clipboard; done", changes))
		took := time.Since(start)
		// The panel shows what the desktop's clipboard holds once the flood
		// is over: its last change, unless xclip's forked owners took the
		// selection out of order (xclip returns before its child owns it).
		last := settledClipboard(t, shell)
		if last != fmt.Sprintf("flood-%d", changes) {
			t.Logf("after the flood the desktop's clipboard holds %q, not the last change", last)
		}
		if err := expect.Locator(page.GetByTestId("clipboard-text")).ToHaveValue(last + "\n"); err != nil {
			v, _ := page.GetByTestId("clipboard-text").InputValue()
			note, _ := page.GetByTestId("clipboard-note").TextContent()
			t.Fatalf("after %d clipboard changes in %v the panel shows %q, not the desktop's %q; its note says %q", changes, took.Round(time.Millisecond), v, last+"\n", note)
		}
		switch flooded := changes > 20+5*took.Seconds(); {
		case flooded && !strings.Contains(p.Log(), "reason=flood"):
			t.Errorf("%d clipboard changes in %v: the portal's log has no flood drop", changes, took.Round(time.Second))
		case !flooded:
			t.Logf("%d clipboard changes took %v, slower than the limit lets through: no flood to drop", changes, took.Round(time.Second))
		}
		// 4 MB: Xvnc itself keeps it (its MaxCutText is 256 KiB), and the
		// relay would cut it; the panel keeps what it had.
		shell.run("head -c 3000000 /dev/urandom | base64 | xclip -i -selection clipboard")
		time.Sleep(2 * time.Second)
		if v, _ := page.GetByTestId("clipboard-text").InputValue(); len(v) > 256<<10 {
			t.Errorf("the panel holds %d bytes; want at most 256 KiB", len(v))
		}
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	})

	// Focus the terminal window: openbox gives the focus on a click.
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	must(t, page.Mouse().Click(box.X+200, box.Y+200))

	desk := xDesk{page: page, shell: shell, home: p.homeOf(d.Name)}
	t.Run("keyboard layouts", func(t *testing.T) { typeLayouts(t, page, desk) })
	t.Run("shortcuts", func(t *testing.T) { typeShortcuts(t, page, desk) })
	t.Run("input method text", func(t *testing.T) { typeComposed(t, page, p.homeOf(d.Name)) })

	t.Run("paste as keys into the desktop's terminal window", func(t *testing.T) {
		pasteAsKeys(t, page, "echo typed-$((6*7)) > ~/pasted.txt\n")
		file := filepath.Join(p.homeOf(d.Name), "pasted.txt")
		if !eventually(5*time.Second, func() bool { b, _ := os.ReadFile(file); return string(b) == "typed-42\n" }) {
			b, _ := os.ReadFile(file)
			t.Errorf("%s holds %q; want typed-42", file, b)
		}
	})

	t.Run("paste as keys types any text", func(t *testing.T) {
		// Xvnc maps each keysym to a key of its own, whatever the layout.
		pasteAsKeys(t, page, "head -n1 > ~/unicode.txt\nGrüße € 日本語 ✓\n")
		waitFile(t, filepath.Join(p.homeOf(d.Name), "unicode.txt"), "Grüße € 日本語 ✓\n")
	})

	t.Run("paste as keys refuses and caps", func(t *testing.T) {
		note := page.GetByTestId("clipboard-note")
		refusedAsKeys(t, page, "bell\a", consoleKeyboard, "U+0007")
		// A megabyte: refused whole, with its length; the console stays up.
		_, err := page.Evaluate(`() => { document.getElementById('clipboard-text').value = 'x'.repeat(1 << 20); }`)
		must(t, err)
		must(t, page.GetByTestId("paste-as-keys").Click())
		must(t, expect.Locator(note).ToContainText("Too long to type: 1048576 characters"))
		must(t, page.GetByTestId("clipboard-send").Click())
		must(t, expect.Locator(note).ToContainText("Too long to send: 1048576 bytes"))
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		screenshot(t, page, "paste-refused")
		// A long paste can be cancelled midway.
		must(t, page.GetByTestId("clipboard-text").Fill("#"+strings.Repeat("a", 400)))
		must(t, page.GetByTestId("paste-as-keys").Click())
		must(t, expect.Locator(page.GetByTestId("paste-progress-row")).ToBeVisible())
		screenshot(t, page, "paste-progress")
		must(t, page.GetByTestId("paste-cancel").Click())
		must(t, expect.Locator(note).ToContainText("Stopped after"))
		pasteAsKeys(t, page, "\n") // end the half-typed comment line
	})

	t.Run("keys menu: Ctrl+Alt+Del reaches the X server", func(t *testing.T) {
		// cat in the terminal window writes what xterm makes of the keys it
		// gets: Delete with Ctrl and Alt held is CSI 3;7~ (modifier 1+2+4).
		pasteAsKeys(t, page, "cat > ~/keys.log\n")
		time.Sleep(300 * time.Millisecond)
		must(t, page.GetByTestId("keys-menu").Click())
		must(t, expect.Locator(page.GetByTestId("keys-list")).ToBeVisible())
		// Xvnc takes keysyms: no word of a guest's layout.
		must(t, expect.Locator(page.GetByTestId("keys-note")).ToBeHidden())
		screenshot(t, page, "keys-menu")
		must(t, page.GetByTestId("key-ctrl-alt-del").Click())
		pasteAsKeys(t, page, "\n")
		file := filepath.Join(p.homeOf(d.Name), "keys.log")
		if !eventually(5*time.Second, func() bool { b, _ := os.ReadFile(file); return strings.Contains(string(b), "\x1b[3;7~") }) {
			b, _ := os.ReadFile(file)
			t.Errorf("the terminal window got %q; want Ctrl+Alt+Delete (\\x1b[3;7~)", b)
		}
	})
	t.Run("keys menu: Alt+Tab switches windows", func(t *testing.T) { altTabFromKeys(t, page, shell) })

	t.Run("terminal: paste as keys, selection to the panel, send pastes", func(t *testing.T) {
		_, err := page.Goto(p.URL + "/desktops/local/" + d.Name + "?protocol=terminal")
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("status")).ToContainText("Connected"))
		must(t, page.GetByTestId("clipboard-toggle").Click())
		pasteAsKeys(t, page, "echo term-$((6*7))\n")
		waitXterm(t, page, regexp.MustCompile(`(?m)^term-42$`), 10*time.Second)
		_, err = page.Evaluate(`() => document.getElementById('screen').xterm.selectAll()`)
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("clipboard-text")).ToHaveValue(regexp.MustCompile(`term-42`)))
		must(t, page.GetByTestId("clipboard-text").Fill("echo pasted-$((6*7))"))
		must(t, page.GetByTestId("clipboard-send").Click())
		pasteAsKeys(t, page, "\n")
		waitXterm(t, page, regexp.MustCompile(`(?m)^pasted-42$`), 10*time.Second)
		screenshot(t, page, "terminal-panel")
		_, err = page.Goto(p.URL + "/desktops/local/" + d.Name + "?protocol=vnc")
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	})

	t.Run("clipboard off: the relay drops both ways", func(t *testing.T) {
		if code := p.APIBody(t, "boss", "PATCH", "/api/vdi/pools/local/demo", `{"policy":{"clipboard":"off"}}`, nil); code != 200 {
			t.Fatalf("PATCH policy: %d", code)
		}
		shell.run("printf before-off | xclip -i -selection clipboard")
		_, err := page.Reload()
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
		must(t, page.GetByTestId("clipboard-toggle").Click())
		must(t, expect.Locator(page.GetByTestId("clipboard-note")).ToContainText("clipboard off"))
		must(t, expect.Locator(page.GetByTestId("clipboard-send")).ToBeDisabled())
		must(t, expect.Locator(page.GetByTestId("paste-as-keys")).ToBeDisabled())
		screenshot(t, page, "clipboard-off")
		// A page that ignores the policy sends anyway.
		_, err = page.Evaluate(`() => document.getElementById('screen').rfb.clipboardPasteFrom('forbidden from the page')`)
		must(t, err)
		shell.run("printf 'forbidden from the desktop' | xclip -i -selection clipboard")
		time.Sleep(2 * time.Second)
		if got := shell.clipboard(); strings.Contains(got, "forbidden from the page") {
			t.Errorf("the desktop's clipboard got the page's text with clipboard off: %q", got)
		}
		if v, _ := page.GetByTestId("clipboard-text").InputValue(); strings.Contains(v, "forbidden") {
			t.Errorf("the panel shows the desktop's text with clipboard off: %q", v)
		}
		var dropped []string
		for _, line := range strings.Split(p.Log(), "\n") {
			if strings.Contains(line, "clipboard dropped") && strings.Contains(line, "reason=policy") {
				dropped = append(dropped, line)
			}
		}
		joined := strings.Join(dropped, "\n")
		if !strings.Contains(joined, "direction=to-desktop") || !strings.Contains(joined, "direction=from-desktop") {
			t.Errorf("the portal's log has these clipboard drops:\n%s\nwant one each way", joined)
		}
		t.Logf("logged: %s", joined)
	})
}

// TestComfort_Reconnect stops the desktop under an open VNC console: the
// page says it is stopped and does not dial again by itself (a stopped
// desktop does not come back on its own, and taking the screen back from
// another tab that started it would be a fight); once it is started again
// elsewhere, a reload brings the console back.
func TestComfort_Reconnect(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1024, 700)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+d.Name+"/stop", nil); code != 200 {
		t.Fatalf("stop: %d", code)
	}
	banner := page.GetByTestId("ended")
	must(t, expect.Locator(banner).ToContainText("Your desktop is stopped"))
	screenshot(t, page, "stopped")
	opened := strings.Count(p.Log(), `msg="console opened"`)
	time.Sleep(3 * time.Second) // nothing dials the stopped desktop meanwhile
	if n := strings.Count(p.Log(), `msg="console opened"`); n != opened {
		t.Errorf("the page opened %d consoles of a stopped desktop by itself", n-opened)
	}
	must(t, expect.Locator(banner).ToContainText("Your desktop is stopped"))
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+d.Name+"/start", nil); code != 200 {
		t.Fatalf("start: %d", code)
	}
	_, err := page.Reload()
	must(t, err)
	must(t, playwright.NewPlaywrightAssertions(testwait.MS(40000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	must(t, expect.Locator(banner).ToBeHidden())
}

// TestComfort_KioskKeys sends Ctrl+Alt+Del from the kiosk's overlay: the
// overlay closes and the keys reach the desktop's terminal window.
func TestComfort_KioskKeys(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	page := b.MustNewPage(t, 1024, 700)
	signIn(t, page, p, "alice", "/kiosk/demo?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("screen")).ToHaveAttribute("data-connected", "true"))
	var mine []desktop
	p.API(t, "alice", "GET", "/api/vdi/desktops", &mine)
	if len(mine) != 1 {
		t.Fatalf("alice holds %d desktops; want the kiosk's one", len(mine))
	}
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	typeLine := func(line string) {
		_, err := page.Evaluate(`(line) => { const r = document.getElementById('screen').rfb;
			r.sendKey(0xff0d); for (const ch of line) r.sendKey(ch.charCodeAt(0)); r.sendKey(0xff0d); }`, line)
		must(t, err)
	}
	// The console connects as the desktop starts: its terminal window may
	// not be up or focused yet. Type until the shell shows it has the keys.
	ready := filepath.Join(p.homeOf(mine[0].Name), "kiosk-ready")
	if !eventually(10*time.Second, func() bool {
		must(t, page.Mouse().Click(box.X+200, box.Y+200)) // focus the terminal window
		typeLine("touch ~/kiosk-ready")
		return eventually(time.Second, func() bool { _, err := os.Stat(ready); return err == nil })
	}) {
		t.Fatalf("typing into the kiosk's desktop terminal did not create %s", ready)
	}
	typeLine("cat > ~/kiosk-keys.log")
	time.Sleep(500 * time.Millisecond)
	must(t, page.Keyboard().Press("Control+Alt+Shift+K"))
	must(t, expect.Locator(page.GetByTestId("kiosk-overlay")).ToBeVisible())
	screenshot(t, page, "kiosk-overlay-keys")
	must(t, page.GetByTestId("key-ctrl-alt-del").Click())
	must(t, expect.Locator(page.GetByTestId("kiosk-overlay")).ToBeHidden())
	_, err = page.Evaluate(`() => document.getElementById('screen').rfb.sendKey(0xff0d)`)
	must(t, err)
	file := filepath.Join(p.homeOf(mine[0].Name), "kiosk-keys.log")
	if !eventually(5*time.Second, func() bool { b, _ := os.ReadFile(file); return strings.Contains(string(b), "\x1b[3;7~") }) {
		b, _ := os.ReadFile(file)
		t.Errorf("the terminal window got %q; want Ctrl+Alt+Delete (\\x1b[3;7~)", b)
	}
}
