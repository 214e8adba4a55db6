package agent

import (
	"slices"
	"testing"
)

func TestChord(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []uint32
	}{
		{"ctrl+alt+t", []uint32{0xffe3, 0xffe9, 't'}},
		{"Enter", []uint32{0xff0d}},
		{"ctrl+C", []uint32{0xffe3, 'C'}},
		{"ctrl++", []uint32{0xffe3, '+'}},
		{"F5", []uint32{0xffc2}},
		{"é", []uint32{0xe9}},
		{"ж", []uint32{0x01000436}},
	} {
		if got, err := chord(c.in); err != nil || !slices.Equal(got, c.want) {
			t.Errorf("chord(%q) = %x, %v; want %x", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "ctrl+hyper", "enterr"} {
		if got, err := chord(bad); err == nil {
			t.Errorf("chord(%q) = %x; want an error", bad, got)
		}
	}
}

func TestRuneKeysym(t *testing.T) {
	for r, want := range map[rune]uint32{'a': 'a', '~': '~', '\n': 0xff0d, '\t': 0xff09, 'ü': 0xfc, '€': 0x010020ac, '😀': 0x0101f600} {
		if got := runeKeysym(r); got != want {
			t.Errorf("runeKeysym(%q) = %#x; want %#x", r, got, want)
		}
	}
}
