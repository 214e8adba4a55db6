package relay

import (
	"bytes"
	"strings"
	"testing"
)

func TestUSBRedirHello(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		b := USBRedirHello("corral test 1", 0x1ff)
		if len(b) != 12+64+4 {
			t.Fatalf("hello is %d bytes; want 80", len(b))
		}
		v, caps, err := ReadUSBRedirHello(bytes.NewReader(b))
		if err != nil || v != "corral test 1" || len(caps) != 1 || caps[0] != 0x1ff {
			t.Fatalf("ReadUSBRedirHello = %q, %v, %v; want the hello back", v, caps, err)
		}
	})
	for _, tc := range []struct {
		name string
		in   []byte
		says string
	}{
		{"NotHello", append([]byte{1, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0}, make([]byte, 64)...), "type 1"},
		{"Short", []byte{0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0}, "hello of 8 bytes"},
		{"Huge", []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}, "hello of"},
		{"Truncated", USBRedirHello("x")[:40], "reading the hello"},
		{"NoNUL", append([]byte{0, 0, 0, 0, 64, 0, 0, 0, 0, 0, 0, 0}, bytes.Repeat([]byte("a"), 64)...), "NUL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := ReadUSBRedirHello(bytes.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("ReadUSBRedirHello = %v; want an error saying %q", err, tc.says)
			}
		})
	}
}
