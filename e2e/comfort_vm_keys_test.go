package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestComfort_SerialPasteAsKeys logs in on a local VM's serial console with
// paste-as-keys alone: the user name, the password and a command; keys
// typed on its VNC console reach the guest as scan codes; and with the
// guest's layout set to each row's, the keyboard table's rows and
// shortcuts arrive byte for byte.
func TestComfort_SerialPasteAsKeys(t *testing.T) {
	img := vmImage(t)
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_DEMO_VM_POOL_SIZE=1", "CORRAL_VDI_VM_IMAGE="+img)
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	d := claimVM(t, p, "alice")
	page := b.MustNewPage(t, 1024, 700)
	// This browser's keyboard is French, as the Keyboard Map API tells
	// (what Chromium answers here is a US keyboard's).
	must(t, page.AddInitScript(playwright.Script{Content: playwright.String(`Object.defineProperty(navigator, 'keyboard', { value: {
		getLayoutMap: async () => new Map([['KeyQ', 'a'], ['KeyW', 'z'], ['KeyA', 'q'], ['Semicolon', 'm'], ['Digit2', 'é'], ['Digit7', 'è']]) } })`)}))
	// QEMU's VNC server through the relay's clipboard filter: the filter
	// follows its framebuffer updates, so the console stays up.
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	time.Sleep(3 * time.Second)
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	if strings.Contains(p.Log(), "cannot follow") {
		t.Errorf("the clipboard filter could not follow QEMU's VNC:\n%s", p.Log())
	}
	screenshot(t, page, "qemu-vnc")
	// QEMU takes physical keys, and the guest's layout makes the
	// characters; with no choice kept, the page takes this browser's
	// keyboard for it. Type as keys refuses what that layout cannot type
	// (ü is a dead key and u on French), naming it, and types nothing.
	openControl(t, page, "clipboard-toggle")
	refusedAsKeys(t, page, "Grüße", "this desktop's French layout", `"ß" (U+00DF)`)
	openControl(t, page, "clipboard-toggle") // closed again

	// The serial console, in a page of its own beside the VNC one.
	serial := b.MustNewPage(t, 1024, 700)
	signIn(t, serial, p, "alice", "/desktops/local/"+d.Name+"?protocol=serial")
	must(t, expect.Locator(serial.GetByTestId("status")).ToContainText("log in as root"))
	creds, err := serial.GetByTestId("screen").GetAttribute("data-credentials")
	must(t, err)
	login, password, _ := strings.Cut(creds, ":")
	waitXterm(t, serial, regexp.MustCompile(`(?m)corral-vm login: ?$`), 90*time.Second)
	openControl(t, serial, "clipboard-toggle") // the long status may fold the bar into Menu
	pasteAsKeys(t, serial, login+"\n")
	waitXterm(t, serial, regexp.MustCompile(`(?m)Password: ?$`), 10*time.Second)
	pasteAsKeys(t, serial, password+"\n")
	waitXterm(t, serial, regexp.MustCompile(`(?m)root@corral-vm:~# ?$`), 15*time.Second)
	pasteAsKeys(t, serial, "echo serial-$((6*7))\n")
	waitXterm(t, serial, regexp.MustCompile(`(?m)^serial-42$`), 10*time.Second)
	screenshot(t, serial, "serial-paste-as-keys")
	// The VM's display has two heads: a second window shows the second.
	vmSecondHead(t, page, serial)

	t.Run("keys reach the guest as scan codes", func(t *testing.T) {
		// QEMU's Extended Key Event through the hub: the guest types the
		// physical keys with its own layout (US here). A German keyboard's
		// keys that type y, z, ü, ö and " (Shift+2) are the US keys z, y,
		// [, ; and @; as keysyms QEMU's en-us keymap would give y and z
		// and drop the rest. Typed at the VGA console's login prompt
		// (tty1), read back from its screen (/dev/vcs1) over serial.
		pasteAsKeys(t, serial, "for i in $(seq 300); do grep -q login: /dev/vcs1 && break; sleep 0.2; done; echo tty1-$((6*7))\n")
		waitXterm(t, serial, regexp.MustCompile(`(?m)^tty1-42$`), 90*time.Second)
		focusDesktop(t, page)
		newDevInput(t, page).strokes(plain("KeyZ", "y"), plain("KeyY", "z"), plain("BracketLeft", "ü"), plain("Semicolon", "ö"), shifted("Digit2", `"`))
		pasteAsKeys(t, serial, "for i in $(seq 150); do grep -q 'login: zy' /dev/vcs1 && break; sleep 0.2; done; grep -o 'login: [^ ]*' /dev/vcs1\n")
		waitXterm(t, serial, regexp.MustCompile(`(?m)^login: zy\[;@$`), 60*time.Second)
		screenshot(t, page, "qemu-scan-codes")
		// The Keys list says the guest's layout applies.
		for _, size := range issueSizes {
			must(t, page.SetViewportSize(size.width, size.height))
			// The bar folds or unfolds in the next frames (fold.js).
			_, err := page.Evaluate(`() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))`)
			must(t, err)
			openControl(t, page, "keys-menu")
			must(t, expect.Locator(page.GetByTestId("keys-note")).ToHaveText(
				"Your keys reach this desktop as physical keys: its own keyboard layout makes the characters. Set it to your keyboard's (loadkeys de, setxkbmap de, or Windows' language settings), and choose it here for Type as keys."))
			inViewport(t, page, page.GetByTestId("keys-note"), "the Keys list's note", size.width)
			screenshot(t, page, "qemu-keys-"+size.name)
			must(t, page.GetByTestId("keys-menu").Click())
			closeMenu(t, page)
		}
	})

	t.Run("type as keys in the guest's layout", func(t *testing.T) {
		// The guest made German (loadkeys de), tty2 runs cat into a file;
		// the user picks German in the Keys list and types text with
		// AltGr, Shift and dead keys. Read back from the file, byte for
		// byte; an input method's Japanese is refused. Without the
		// layout, QEMU's US keymap types y for z, and nothing for ü, €, @
		// or {.
		enterXterm(t, serial, "loadkeys de && openvt -c 2 -s -- sh -c 'exec cat >/tmp/typed'; echo vt2-$((6*7))")
		waitXterm(t, serial, regexp.MustCompile(`(?m)^vt2-42$`), 30*time.Second)
		must(t, page.SetViewportSize(1024, 700))
		// The bar unfolds in the next frames (fold.js).
		_, err := page.Evaluate(`() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))`)
		must(t, err)
		openControl(t, page, "keys-menu")
		must(t, expect.Locator(page.GetByTestId("keys-layout-select")).ToHaveValue("fr"))
		kept, err := page.ExpectResponse("**/api/vdi/settings/keyboard", func() error {
			_, err := page.GetByTestId("keys-layout-select").SelectOption(playwright.SelectOptionValues{Values: &[]string{"de"}})
			return err
		})
		must(t, err)
		if kept.Status() != 204 {
			t.Fatalf("keeping the layout: %d", kept.Status())
		}
		screenshot(t, page, "qemu-keys-layout")
		// Kept for alice: her next console page carries it.
		html, err := page.Evaluate(`async () => (await fetch(location.href)).text()`)
		must(t, err)
		if !strings.Contains(html.(string), `data-layout="de"`) {
			t.Error("alice's next console page does not carry German as her layout")
		}
		must(t, page.GetByTestId("keys-menu").Click())
		// An input method's word: no German key types it, so it is
		// refused over the screen, naming what, and nothing is typed (the
		// file below holds only what Type as keys types).
		focusDesktop(t, page)
		newDevInput(t, page).compose([]string{"に", "日本"}, "日本語")
		must(t, expect.Locator(page.GetByTestId("console-keys-note")).
			ToHaveText(`Not typed: this desktop's German layout cannot type "日" (U+65E5), "本" (U+672C), "語" (U+8A9E).`))
		screenshot(t, page, "qemu-ime-refused")
		openControl(t, page, "clipboard-toggle")
		refusedAsKeys(t, page, "Grüße € 日本語 ✓", "this desktop's German layout",
			`"日" (U+65E5), "本" (U+672C), "語" (U+8A9E), "✓" (U+2713)`)
		const text = "Grüße € äöü ÄÖÜ @{[]}\\|~ zy ê^`\n"
		pasteAsKeys(t, page, text)
		screenshot(t, page, "qemu-typed-in-layout")
		enterXterm(t, serial, "for i in $(seq 100); do [ -s /tmp/typed ] && break; sleep 0.2; done; od -An -v -tx1 /tmp/typed; echo od-$((6*7))")
		waitXterm(t, serial, regexp.MustCompile(regexp.QuoteMeta(odHex(text))+`\s*od-42`), 30*time.Second)
	})

	// Each row of the keyboard table as Chromium produces it for its
	// layout, the guest's layout made that one (loadkeys, as its user
	// would), typed into a virtual terminal of the guest.
	vm := &vmDesk{serial: xtermSerial{serial}}
	t.Run("keyboard layouts", func(t *testing.T) { typeLayouts(t, page, vm) })
	t.Run("shortcuts", func(t *testing.T) { typeShortcuts(t, page, vm) })
}

// odHex returns what busybox's od -An -v -tx1 prints for text's UTF-8
// bytes: 16 a line, each as a space and two hex digits.
func odHex(text string) string {
	var b strings.Builder
	for i, c := range []byte(text) {
		if i > 0 && i%16 == 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, " %02x", c)
	}
	return b.String()
}
