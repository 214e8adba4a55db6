package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	playwright "github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// A stroke is one key as Chromium reports it for a keyboard layout: the
// DOM key, the physical key's code, and what it types (empty for a dead
// key, whose character comes with the next key, as Chromium composes it).
// With names AltGraph, Shift or Control held around it.
type stroke struct {
	key, code, text string
	with            string // "", "Shift", "AltGraph" or "Control"
}

// plain, shifted, altGr and dead build strokes: key is the character the
// layout gives the physical key code.
func plain(code, ch string) stroke   { return stroke{key: ch, code: code, text: ch} }
func shifted(code, ch string) stroke { return stroke{key: ch, code: code, text: ch, with: "Shift"} }
func altGr(code, ch string) stroke   { return stroke{key: ch, code: code, text: ch, with: "AltGraph"} }

// ctrl is a shortcut: Ctrl held around the key that gives ch on the
// layout (Chromium reports the layout's character and types nothing).
func ctrl(code, ch string) stroke { return stroke{key: ch, code: code, with: "Control"} }

func dead(code string, with string) stroke {
	return stroke{key: "Dead", code: code, with: with}
}

// devInput sends Chromium's own input events to a page through the
// DevTools protocol: what a keyboard of another layout or an input
// method produces, which Playwright's keyboard (a US layout) cannot.
type devInput struct {
	t   *testing.T
	cdp playwright.CDPSession
}

func newDevInput(t *testing.T, page playwright.Page) devInput {
	t.Helper()
	cdp, err := page.Context().NewCDPSession(page)
	must(t, err)
	t.Cleanup(func() { cdp.Detach() })
	return devInput{t: t, cdp: cdp}
}

func (d devInput) send(method string, params map[string]any) {
	d.t.Helper()
	_, err := d.cdp.Send(method, params)
	must(d.t, err)
}

// modifier keys as Chromium reports them on Linux.
var modifierKeys = map[string]stroke{
	"Shift":    {key: "Shift", code: "ShiftLeft"},
	"AltGraph": {key: "AltGraph", code: "AltRight"},
	"Control":  {key: "Control", code: "ControlLeft"},
}

func (d devInput) key(kind string, s stroke, mods int) {
	d.t.Helper()
	p := map[string]any{"type": kind, "key": s.key, "code": s.code, "modifiers": mods}
	if kind == "keyDown" && s.text != "" {
		p["text"], p["unmodifiedText"] = s.text, s.text
	} else if kind == "keyDown" {
		p["type"] = "rawKeyDown"
	}
	if s.code == "AltRight" || s.code == "ShiftLeft" {
		p["location"] = 1
		if s.code == "AltRight" {
			p["location"] = 2
		}
	}
	d.send("Input.dispatchKeyEvent", p)
}

// strokes types each stroke: its modifier down, the key down and up, the
// modifier up.
func (d devInput) strokes(ss ...stroke) {
	d.t.Helper()
	for _, s := range ss {
		mods := 0
		switch s.with {
		case "Shift":
			mods = 8
		case "Control":
			mods = 2
		}
		if m, ok := modifierKeys[s.with]; ok {
			d.key("keyDown", m, mods)
		}
		d.key("keyDown", s, mods)
		d.key("keyUp", s, mods)
		if m, ok := modifierKeys[s.with]; ok {
			d.key("keyUp", m, 0)
		}
	}
}

// compose plays an input method: the composition's steps shown, then
// committed as text.
func (d devInput) compose(steps []string, commit string) {
	d.t.Helper()
	for _, s := range steps {
		n := len([]rune(s))
		d.send("Input.imeSetComposition", map[string]any{"text": s, "selectionStart": n, "selectionEnd": n})
	}
	d.send("Input.insertText", map[string]any{"text": commit})
}

// enter presses Enter.
func (d devInput) enter() {
	d.t.Helper()
	d.strokes(stroke{key: "Enter", code: "Enter", text: "\r"})
}

// waitFile waits until the file holds want, and says what it holds if not.
func waitFile(t *testing.T, file, want string) {
	t.Helper()
	if !eventually(30*time.Second, func() bool { b, _ := os.ReadFile(file); return string(b) == want }) {
		b, _ := os.ReadFile(file)
		t.Errorf("%s holds %q; want %q", filepath.Base(file), b, want)
	}
}

// focusDesktop clicks into the desktop's terminal window (openbox gives it
// the focus) so that the page's keys go to the desktop.
func focusDesktop(t *testing.T, page playwright.Page) {
	t.Helper()
	box, err := page.Locator("#screen canvas").BoundingBox()
	must(t, err)
	must(t, page.Mouse().Click(box.X+200, box.Y+200))
}

// keyboardLayouts is the table of layouts: strokes as Chromium reports
// them on each layout, the text they type, and the layout a desktop that
// makes the characters of physical keys (RDP, a VM) is set to, as its
// user would: setxkbmap's name, us-intl its us with the intl variant (the
// tiny VM's loadkeys takes the same names).
var keyboardLayouts = []struct {
	name, layout string
	strokes      []stroke
	want         string
}{
	{"German AltGr", "de", []stroke{altGr("KeyQ", "@"), altGr("KeyE", "€"), altGr("Digit7", "{"), altGr("Digit0", "}"),
		altGr("Digit8", "["), altGr("Digit9", "]"), altGr("Minus", `\`), altGr("IntlBackslash", "|"), altGr("BracketRight", "~"),
		plain("Quote", "ä"), plain("Semicolon", "ö"), plain("BracketLeft", "ü"), plain("Minus", "ß"), plain("KeyY", "z"), plain("KeyZ", "y")},
		`@€{}[]\|~äöüßzy`},
	{"French AZERTY, dead ^", "fr", []stroke{plain("Digit2", "é"), plain("Digit7", "è"), plain("Digit0", "à"), plain("Digit9", "ç"), plain("Quote", "ù"),
		plain("KeyQ", "a"), plain("KeyA", "q"), dead("BracketLeft", ""), plain("KeyE", "ê"), dead("BracketLeft", "Shift"), plain("KeyI", "ï")},
		"éèàçùaqêï"},
	{"UK", "gb", []stroke{shifted("Digit3", "£"), shifted("Digit2", `"`), shifted("Quote", "@"), plain("Backslash", "#"), shifted("Backslash", "~"),
		plain("IntlBackslash", `\`), shifted("IntlBackslash", "|"), shifted("Backquote", "¬")},
		`£"@#~\|¬`},
	{"US-International, dead keys", "us-intl", []stroke{dead("Quote", ""), plain("KeyE", "é"), dead("Quote", "Shift"), plain("KeyU", "ü"),
		dead("Backquote", "Shift"), plain("KeyN", "ñ"), dead("Backquote", ""), plain("KeyA", "à"), dead("Digit6", "Shift"), plain("KeyO", "ô"),
		dead("Quote", ""), plain("Space", "'"), altGr("KeyS", "ß"), altGr("Digit5", "€")},
		"éüñàô'ß€"},
	{"Spanish", "es", []stroke{plain("Semicolon", "ñ"), plain("Backslash", "ç"), plain("Equal", "¡"), shifted("Equal", "¿"),
		dead("Quote", ""), plain("KeyA", "á"), dead("Quote", "Shift"), plain("KeyU", "ü"), altGr("Digit2", "@"), altGr("Digit3", "#"), altGr("KeyE", "€")},
		"ñç¡¿áü@#€"},
	{"Swiss-German", "ch", []stroke{plain("KeyY", "z"), plain("KeyZ", "y"), plain("BracketLeft", "ü"), plain("Semicolon", "ö"), plain("Quote", "ä"),
		altGr("Digit2", "@"), altGr("Digit3", "#"), altGr("BracketLeft", "["), altGr("BracketRight", "]"), altGr("Quote", "{"), altGr("Backslash", "}"),
		dead("Equal", ""), plain("KeyE", "ê"), shifted("Digit3", "*")},
		"zyüöä@#[]{}ê*"},
	// Nordic: Swedish and Norwegian have ö and ø, ä and æ on the same keys.
	{"Swedish", "se", []stroke{plain("BracketLeft", "å"), plain("Quote", "ä"), plain("Semicolon", "ö"), shifted("BracketLeft", "Å"),
		altGr("Digit2", "@"), altGr("Digit4", "$"), altGr("Digit7", "{")},
		"åäöÅ@${"},
	{"Norwegian", "no", []stroke{plain("Semicolon", "ø"), plain("Quote", "æ"), plain("BracketLeft", "å"), shifted("Semicolon", "Ø"), shifted("Quote", "Æ"),
		altGr("Digit2", "@"), altGr("Digit4", "$"), altGr("Digit0", "}")},
		"øæåØÆ@$}"},
}

// typeLayouts types each layout's row (or only those named) into the
// desktop's terminal (head writes it to a file) and compares the file,
// byte for byte.
func typeLayouts(t *testing.T, page playwright.Page, desk keyDesk, only ...string) {
	in := newDevInput(t, page)
	for i, l := range keyboardLayouts {
		if len(only) > 0 && !slices.Contains(only, l.name) {
			continue
		}
		t.Run(l.name, func(t *testing.T) {
			name := "kb" + string(rune('a'+i)) + ".txt"
			desk.listen(t, l.layout, false, "head -n1", name)
			focusDesktop(t, page)
			in.strokes(l.strokes...)
			in.enter()
			desk.holds(t, name, l.want+"\n")
		})
	}
}

// typeComposed commits input-method text into the desktop's terminal
// window and compares what the shell wrote.
func typeComposed(t *testing.T, page playwright.Page, home string) {
	in := newDevInput(t, page)
	pasteAsKeys(t, page, "head -n1 > ~/ime.txt\n")
	focusDesktop(t, page)
	in.compose([]string{"に", "にほ", "にほん", "にほんご"}, "日本語")
	in.compose([]string{"zhong", "中文"}, "中文")
	in.enter()
	waitFile(t, filepath.Join(home, "ime.txt"), "日本語中文\n")

	t.Run("a flood is cut, the console stays", func(t *testing.T) {
		// A page or an extension committing 5000 characters at once: the
		// first 2000 (ime.js MAX_TEXT) are typed, the rest dropped
		// and said.
		// With echo on, the desktop's own terminal loses a few of 2000
		// keys typed at once on a quiet machine (the portal delivered
		// them all: with echo off every one arrives); the flood's cut is
		// what is tested here, not the guest's tty.
		pasteAsKeys(t, page, "stty -echo; head -n1 > ~/flood.txt; stty echo\n")
		focusDesktop(t, page)
		in.send("Input.insertText", map[string]any{"text": strings.Repeat("x", 5000)})
		in.enter()
		note := page.GetByTestId("console-keys-note")
		must(t, playwright.NewPlaywrightAssertions(testwait.MS(15000)).Locator(note).ToContainText("more than 2000 characters"))
		screenshot(t, page, "ime-flood")
		if !eventually(30*time.Second, func() bool { b, _ := os.ReadFile(filepath.Join(home, "flood.txt")); return len(b) > 0 }) {
			t.Fatal("flood.txt stays empty")
		}
		waitFile(t, filepath.Join(home, "flood.txt"), strings.Repeat("x", 2000)+"\n")
		must(t, playwright.NewPlaywrightAssertions(testwait.MS(15000)).Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	})

	t.Run("more characters than Xvnc has spare keys", func(t *testing.T) {
		// Xvnc binds each character its keymap lacks to one of its 19
		// spare keys and drops new ones once they are taken; the portal
		// clears the keys it bound before they run out
		// (local/desktop_keymap.go), and the layout's keys keep working.
		// 30 distinct characters, committed a word at a time, then keys
		// of the layout and ones bound before.
		const text = "春夏秋冬山川海空雨雪花鳥風月森林火水金土木石竹米糸虫貝車門耳"
		pasteAsKeys(t, page, "head -n1 > ~/ime-many.txt\n")
		focusDesktop(t, page)
		r := []rune(text)
		for i := 0; i < len(r); i += 3 {
			w := string(r[i:min(i+3, len(r))])
			in.compose([]string{w}, w)
		}
		in.strokes(plain("KeyO", "o"), shifted("KeyK", "K"), plain("Quote", "ä"), altGr("KeyE", "€"))
		in.compose([]string{"日本"}, "日本")
		in.enter()
		waitFile(t, filepath.Join(home, "ime-many.txt"), text+"oKä€日本\n")
	})
}

// shortcuts is the table of Ctrl shortcuts as Chromium reports them on
// layouts whose letters sit on other keys than a US keyboard's (QWERTZ's
// Z, AZERTY's A and Z): Ctrl+C, Ctrl+V, Ctrl+Z, Ctrl+A each; and the
// layout a desktop is set to, as keyboardLayouts'.
var shortcuts = []struct {
	name, layout string
	strokes      []stroke
}{
	{"US", "us", []stroke{ctrl("KeyC", "c"), ctrl("KeyV", "v"), ctrl("KeyZ", "z"), ctrl("KeyA", "a")}},
	{"German QWERTZ", "de", []stroke{ctrl("KeyC", "c"), ctrl("KeyV", "v"), ctrl("KeyY", "z"), ctrl("KeyA", "a")}},
	{"French AZERTY", "fr", []stroke{ctrl("KeyC", "c"), ctrl("KeyV", "v"), ctrl("KeyW", "z"), ctrl("KeyQ", "a")}},
}

// typeShortcuts presses each layout's shortcuts into the desktop's
// terminal in raw mode, where each arrives as the control character the
// desktop made of it, and compares the bytes: Ctrl+C, V, Z and A are
// 0x03, 0x16, 0x1a and 0x01 whatever key the layout has the letter on.
// Only the layouts named, if any.
func typeShortcuts(t *testing.T, page playwright.Page, desk keyDesk, only ...string) {
	in := newDevInput(t, page)
	for i, l := range shortcuts {
		if len(only) > 0 && !slices.Contains(only, l.name) {
			continue
		}
		t.Run(l.name, func(t *testing.T) {
			name := "sc" + string(rune('a'+i)) + ".txt"
			desk.listen(t, l.layout, true, "head -c 4", name)
			focusDesktop(t, page)
			in.strokes(l.strokes...)
			desk.holds(t, name, "\x03\x16\x1a\x01")
		})
	}
}
