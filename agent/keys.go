package agent

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// keysyms names the X keysyms of keys press_keys takes by name.
var keysyms = map[string]uint32{
	"ctrl": 0xffe3, "control": 0xffe3, "shift": 0xffe1, "alt": 0xffe9, "super": 0xffeb, "meta": 0xffeb, "win": 0xffeb, "cmd": 0xffeb,
	"enter": 0xff0d, "return": 0xff0d, "tab": 0xff09, "escape": 0xff1b, "esc": 0xff1b, "backspace": 0xff08, "delete": 0xffff, "del": 0xffff,
	"insert": 0xff63, "home": 0xff50, "end": 0xff57, "pageup": 0xff55, "pagedown": 0xff56,
	"up": 0xff52, "down": 0xff54, "left": 0xff51, "right": 0xff53, "space": 0x20,
	"f1": 0xffbe, "f2": 0xffbf, "f3": 0xffc0, "f4": 0xffc1, "f5": 0xffc2, "f6": 0xffc3,
	"f7": 0xffc4, "f8": 0xffc5, "f9": 0xffc6, "f10": 0xffc7, "f11": 0xffc8, "f12": 0xffc9,
}

// runeKeysym returns the keysym that types r: Latin-1 as itself, newline
// and tab as their keys, anything else as a Unicode keysym.
func runeKeysym(r rune) uint32 {
	switch {
	case r == '\n' || r == '\r':
		return 0xff0d
	case r == '\t':
		return 0xff09
	case r >= 0x20 && r <= 0x7e || r >= 0xa0 && r <= 0xff:
		return uint32(r)
	}
	return 0x01000000 | uint32(r)
}

// chord parses a chord such as "ctrl+alt+t" or "Enter" into its keysyms,
// modifiers first.
func chord(s string) ([]uint32, error) {
	var out []uint32
	parts := strings.Split(s, "+")
	if strings.HasSuffix(s, "+") { // "ctrl++" and "+" press plus
		parts = append(slices.DeleteFunc(parts, func(p string) bool { return p == "" }), "+")
	}
	for _, part := range parts {
		name := strings.TrimSpace(part)
		if ks, ok := keysyms[strings.ToLower(name)]; ok {
			out = append(out, ks)
			continue
		}
		if utf8.RuneCountInString(name) != 1 {
			return nil, vdi.Errorf(vdi.EInvalid, "", "unknown key %q in %q: use a single character or one of ctrl, shift, alt, super, enter, tab, escape, backspace, delete, arrows (up, down, left, right), home, end, pageup, pagedown, f1-f12", name, s)
		}
		r, _ := utf8.DecodeRuneInString(name)
		out = append(out, runeKeysym(r))
	}
	if len(out) == 0 {
		return nil, vdi.Errorf(vdi.EInvalid, "", "no key in %q", s)
	}
	return out, nil
}
