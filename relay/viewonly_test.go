package relay

import (
	"bytes"
	"testing"
)

// TestRFBViewOnly: a watcher's keys, pointer, cut text, desktop resizes
// and power requests never reach the desktop, whatever the chunking; the
// rest passes unchanged, after the portal's own SetEncodings that says
// the watcher follows size changes.
func TestRFBViewOnly(t *testing.T) {
	hello := append([]byte("RFB 003.008\n"), 1, 1) // version, security None, shared
	encodings := []byte{rfbSetEncodings, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 7}
	update := []byte{rfbFramebufferUpdateRequest, 1, 0, 0, 0, 0, 4, 0, 3, 0}
	key := []byte{rfbKeyEvent, 1, 0, 0, 0, 0, 0, 0x61}
	pointer := []byte{rfbPointerEvent, 1, 0, 10, 0, 10}
	cut := append([]byte{rfbClientCutText, 0, 0, 0, 0, 0, 0, 5}, "rm -r"...)
	qemuKey := []byte{rfbQEMU, 0, 0, 1, 0, 0, 0, 0x1e, 0, 0, 0, 0x1e}
	fence := []byte{rfbFence, 0, 0, 0, 0, 0, 0, 0, 2, 'o', 'k'}
	resize := []byte{rfbSetDesktopSize, 0, 1, 0, 0, 200, 1, 0, // 256x200, one screen:
		0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 200, 0, 0, 0, 0} // id, x, y, w, h, flags
	reboot := []byte{rfbXvp, 0, 1, 3}

	var stream, want []byte
	for _, m := range [][]byte{hello, encodings, key, update, pointer, cut, qemuKey, fence, resize, reboot, update} {
		stream = append(stream, m...)
	}
	for _, m := range [][]byte{hello, takesResizes, encodings, update, fence, update} {
		want = append(want, m...)
	}
	for _, chunk := range []int{1, 3, 7, len(stream)} {
		v := new(RFBViewOnly)
		var got []byte
		for i := 0; i < len(stream); i += chunk {
			got = append(got, v.Filter(stream[i:min(i+chunk, len(stream))])...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("chunks of %d: Filter passed %v; want %v", chunk, got, want)
		}
		if new(RFBInput).Feed(got) {
			t.Errorf("chunks of %d: the filtered stream still has input", chunk)
		}
	}
}

// TestRFBViewOnly_Opaque: after a security type it cannot follow, nothing
// passes.
func TestRFBViewOnly_Opaque(t *testing.T) {
	v := new(RFBViewOnly)
	got := v.Filter(append([]byte("RFB 003.008\n"), 19, rfbKeyEvent, 1, 0, 0, 0, 0, 0, 0x61))
	if want := append([]byte("RFB 003.008\n"), 19); !bytes.Equal(got, want) {
		t.Errorf("Filter after VeNCrypt = %v; want only the handshake %v", got, want)
	}
}
