package e2e

import (
	"testing"
	"time"
)

// TestWatch_JoinWhileTheDesktopResizes forces the race a watcher's view
// used to lose: the holder resizes the desktop after the watcher's
// ClientInit and before its own SetEncodings. TigerVNC closes a client
// that has not said it follows size changes; the portal says so for the
// watcher, so its view stays open and gets its picture.
func TestWatch_JoinWhileTheDesktopResizes(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=boss")
	d := mustClaim(t, p, "alice", "demo")
	holder, _, err := dialWS(p, "alice", "/ws/vnc/local/"+d.Name, p.URL)
	must(t, err)
	defer holder.Close()
	alice := rfbHandshake(t, holder)
	alice([]byte{2, 0, 0, 1, 0xff, 0xff, 0xfe, 0xcc}) // SetEncodings: ExtendedDesktopSize
	go func() {                                       // the holder's own updates are not this test's business
		for {
			if _, _, err := holder.ReadMessage(); err != nil {
				return
			}
		}
	}()

	watcher, _, err := dialWS(p, "boss", "/ws/vnc/local/"+d.Name, p.URL)
	must(t, err)
	defer watcher.Close()
	boss := rfbHandshake(t, watcher)          // up to ServerInit, and no SetEncodings yet
	alice([]byte{251, 0, 4, 0, 2, 0x80, 1, 0, // SetDesktopSize 1024x640, one screen
		0, 0, 0, 1, 0, 0, 0, 0, 4, 0, 2, 0x80, 0, 0, 0, 0})
	time.Sleep(time.Second) // Xvnc resizes its screen

	boss([]byte{3, 0, 0, 0, 0, 0, 0, 16, 0, 16}) // FramebufferUpdateRequest, 16x16
	watcher.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, msg, err := watcher.ReadMessage()
	if err != nil {
		t.Fatalf("the watcher's view after the holder resized the desktop: %v; want it still open", err)
	}
	if len(msg) == 0 || msg[0] != 0 {
		t.Errorf("the watcher's first message after the resize: % x; want a FramebufferUpdate", msg[:min(len(msg), 8)])
	}
}
