package local

import (
	"errors"
	"os"
	"testing"
	"time"
)

// TestDesktop_NonSharedClientDropsNobody: a VNC client that asks Xvnc for
// a session of its own (ClientInit shared=0; a native viewer run inside the
// desktop can) must not drop the clients already there, the portal's
// screen hub among them: Xvnc runs -AlwaysShared.
func TestDesktop_NonSharedClientDropsNobody(t *testing.T) {
	d := MustStartDesktop(t, MustDesktopSpec(t, "shared"))
	first, _, _, _ := rfbOpen(t, d.VNCSocket(), true)
	defer first.Close()
	second, _, _, _ := rfbOpen(t, d.VNCSocket(), false)
	defer second.Close()
	// The first client is still served: a FramebufferUpdateRequest is
	// answered (type 0), where a dropped client reads EOF.
	if _, err := first.Write([]byte{3, 0, 0, 0, 0, 0, 0, 16, 0, 16}); err != nil {
		t.Fatalf("the first client was dropped: %v", err)
	}
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 1)
	if _, err := first.Read(buf); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatal("the first client got no answer")
		}
		t.Fatalf("the first client was dropped when a non-shared one joined: %v", err)
	}
	if buf[0] != 0 {
		t.Errorf("the first client read message type %d; want a FramebufferUpdate (0)", buf[0])
	}
}
