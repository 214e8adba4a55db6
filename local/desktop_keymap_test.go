package local

import (
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// cjk is the i-th of many keysyms no layout has (CJK ideographs).
func cjk(i int) uint32 { return 0x01000000 | uint32(0x6625+i) }

// TestDesktop_SpareKeysReset types, through the console's own connection
// to a real Xvnc, three times more distinct characters than Xvnc has
// spare keys: Xvnc binds every one (none "Failure adding new keysym"),
// and the keys the layout binds itself on those keycodes (Japanese: 97
// and 132 are backslash) stay as they are.
func TestDesktop_SpareKeysReset(t *testing.T) {
	d := MustStartDesktop(t, MustDesktopSpec(t, "keys"))
	x := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := d.keys.xmodmap(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	jp := exec.Command("setxkbmap", "jp")
	jp.Env = d.Env()
	if out, err := jp.CombinedOutput(); err != nil {
		t.Fatalf("setxkbmap jp: %v: %s", err, out)
	}
	layout := parseKeymap(x("-pk"))
	for _, code := range []int{97, 132} {
		if !slices.Equal(layout[code], []uint32{'\\', '_', '\\', '_'}) && !slices.Equal(layout[code], []uint32{'\\', '|', '\\', '|'}) {
			t.Fatalf("keycode %d is %x on a Japanese layout; want backslash", code, layout[code])
		}
	}
	raw, _, _, _ := rfbOpen(t, d.VNCSocket(), true)
	defer raw.Close()
	c := keymapConn{Conn: raw, keys: d.keys}
	key := func(keysym uint32, down bool) {
		t.Helper()
		c.BeforeKey(keysym, down)
		msg := []byte{4, 0, 0, 0, 0, 0, 0, 0}
		if down {
			msg[1] = 1
		}
		binary.BigEndian.PutUint32(msg[4:], keysym)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	const n = 60
	for i := range n {
		key(cjk(i), true)
		key(cjk(i), false)
		key('a', true) // the layout's own keys pass untouched
		key('a', false)
	}
	// Xvnc has bound the last one once its keymap shows it.
	bound := func(keysym uint32) bool {
		for _, syms := range parseKeymap(x("-pk")) {
			if slices.Contains(syms, keysym) {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(time.Minute)
	for !bound(cjk(n-1)) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	log, err := os.ReadFile(filepath.Join(d.spec.State, "Xvnc.log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(string(log), "Added unknown keysym"); got < n {
		t.Errorf("Xvnc bound %d keysyms; want %d", got, n)
	}
	if strings.Contains(string(log), "Failure adding new keysym") {
		t.Error("Xvnc ran out of spare keys: its log says Failure adding new keysym")
	}
	after := parseKeymap(x("-pk"))
	for code, syms := range layout {
		if len(syms) > 0 && !slices.Equal(after[code], syms) {
			t.Errorf("keycode %d is %x after the resets; want the layout's %x", code, after[code], syms)
		}
	}
}

// TestKeymap_NotWhileASpareKeyIsDown: a reset would clear a held key's
// keycode under it, so it waits until the key is up.
func TestKeymap_NotWhileASpareKeyIsDown(t *testing.T) {
	resets := 0
	xmodmap := func(_ context.Context, args ...string) (string, error) {
		if args[0] == "-pk" {
			resets++
		}
		return "", nil // a keymap with no spares: room for one keysym
	}
	k := newKeymap(xmodmap, true, slog.New(slog.DiscardHandler))
	tap := func(keysym uint32) { k.beforeKey(keysym, true); k.beforeKey(keysym, false) }
	tap(cjk(0))
	if resets != 1 {
		t.Fatalf("the first keysym made %d resets; want 1 (reading the keymap)", resets)
	}
	k.beforeKey(cjk(0), true) // held: its keycode must stay
	tap(cjk(1))
	if resets != 1 {
		t.Fatalf("resets = %d with a spare key down; want 1", resets)
	}
	k.beforeKey(cjk(0), false)
	tap(cjk(2))
	if resets != 2 {
		t.Fatalf("resets = %d once it is up; want 2", resets)
	}
	tap('a')
	tap(0xff0d)
	if resets != 2 {
		t.Fatalf("ASCII and Return made resets: %d; want 2", resets)
	}
}

// TestParseKeymap reads xmodmap's own output.
func TestParseKeymap(t *testing.T) {
	out := "There are 7 KeySyms per KeyCode; KeyCodes range from 8 to 255.\n\n" +
		"    KeyCode\tKeysym (Keysym)\t...\n    Value  \tValue   (Name) \t...\n\n" +
		"      8    \t\n" +
		"     38    \t0x0061 (a)\t0x0041 (A)\t0x0061 (a)\t0x0041 (A)\t\n" +
		"    230    \t0x10000f1 (no name)\t0x0000 (NoSymbol)\t0x10000f1 (no name)\t\n"
	got := parseKeymap(out)
	want := map[int][]uint32{8: {}, 38: {'a', 'A', 'a', 'A'}, 230: {0x10000f1, 0x10000f1}}
	if len(got) != len(want) {
		t.Fatalf("parseKeymap = %v; want %v", got, want)
	}
	for code, syms := range want {
		if !slices.Equal(got[code], syms) {
			t.Errorf("keycode %d = %x; want %x", code, got[code], syms)
		}
	}
	if !xvncBound(got[230]) || xvncBound(got[38]) {
		t.Errorf("xvncBound(%x) = %v, xvncBound(%x) = %v; want true, false", got[230], xvncBound(got[230]), got[38], xvncBound(got[38]))
	}
}

// TestKeymap_ClearsNoKeyJustTyped: a reset clears a character's key only
// keymapSettle after it was typed (a busy client reads a key press with
// the keymap it holds when it gets to it: cleared and bound to the next
// character sooner, it would type that one instead).
func TestKeymap_ClearsNoKeyJustTyped(t *testing.T) {
	var resets []time.Time
	xmodmap := func(_ context.Context, args ...string) (string, error) {
		if args[0] == "-pk" {
			resets = append(resets, time.Now())
		}
		return "", nil // a keymap with no spares: each new keysym clears the one before
	}
	k := newKeymap(xmodmap, true, slog.New(slog.DiscardHandler))
	tap := func(keysym uint32) { k.beforeKey(keysym, true); k.beforeKey(keysym, false) }
	typed := time.Now()
	tap(cjk(0))
	tap(cjk(1)) // clears cjk(0)'s key
	if len(resets) != 2 {
		t.Fatalf("resets = %d; want 2", len(resets))
	}
	if after := resets[1].Sub(typed); after < keymapSettle {
		t.Errorf("cjk(0)'s key was cleared %v after it was typed; want at least %v", after, keymapSettle)
	}
}
