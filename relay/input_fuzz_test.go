package relay

import (
	"bytes"
	"testing"
)

// FuzzRFBInput feeds an RFB client stream to the input detector whole and
// cut at a fuzzed point: no input panics it, it keeps no more than one
// message's header, and where the stream is cut does not change whether
// input was seen.
func FuzzRFBInput(f *testing.F) {
	handshake := []byte("RFB 003.008\n\x01\x01")
	f.Add(append(append([]byte{}, handshake...), 5, 0, 0, 10, 0, 20), uint16(13))
	f.Add(append(append([]byte{}, handshake...), 4, 1, 0, 0, 0, 0, 0, 0x61), uint16(3))
	f.Add(append(append([]byte{}, handshake...), 2, 0, 0xff, 0xff), uint16(15))
	f.Add(append(append([]byte{}, handshake...), 6, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 'x'), uint16(20))
	f.Add([]byte("RFB 003.008\n\x02"+string(bytes.Repeat([]byte{7}, 16))+"\x01\xff\x00\x00\x00"), uint16(30))
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		whole := &RFBInput{}
		got := whole.Feed(stream)
		at := int(cut) % (len(stream) + 1)
		split := &RFBInput{}
		a := split.Feed(stream[:at])
		b := split.Feed(stream[at:])
		if got != (a || b) {
			t.Fatalf("input seen %v whole, %v cut at %d", got, a || b, at)
		}
		if len(whole.buf) > 8+16*255 {
			t.Fatalf("detector holds %d bytes", len(whole.buf))
		}
	})
}

// FuzzRDPInput is FuzzRFBInput for the RDP plaintext stream.
func FuzzRDPInput(f *testing.F) {
	f.Add([]byte{0x03, 0x00, 0x00, 0x0b, 0x06, 0xe0, 0, 0, 0, 0, 0}, uint16(2))
	f.Add([]byte{0x04, 0x06, 0x01, 0x01, 0x00, 0x1e}, uint16(1))                   // fast-path keyboard
	f.Add([]byte{0x04, 0x80, 0x07, 0x01, 0x00, 0x00, 0x00}, uint16(4))             // two-byte length
	f.Add([]byte{0x03, 0x00, 0xff, 0xff, 0x02, 0xf0, 0x80, 0x64, 0x00}, uint16(7)) // long TPKT
	f.Fuzz(func(t *testing.T, stream []byte, cut uint16) {
		whole := &RDPInput{}
		got := whole.Feed(stream)
		at := int(cut) % (len(stream) + 1)
		split := &RDPInput{}
		a := split.Feed(stream[:at])
		b := split.Feed(stream[at:])
		if got != (a || b) {
			t.Fatalf("input seen %v whole, %v cut at %d", got, a || b, at)
		}
		if len(whole.buf) > rdpPeek {
			t.Fatalf("detector holds %d bytes; want at most %d", len(whole.buf), rdpPeek)
		}
	})
}
