package e2e

import (
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestAttack_FullRefreshLoop: a viewer that asks for its whole screen in a
// loop (a non-incremental FramebufferUpdateRequest as soon as each answer
// is in, Raw, the dearest encoding to send) on a still desktop gets every
// request answered, but the whole screen at most once a second: the hub
// encoded and sent it for every request, ~0.5-0.75 of a core per console
// so looping (10 consoles a user).
func TestAttack_FullRefreshLoop(t *testing.T) {
	p, member := mustVNCDesktop(t)
	ws, _, err := dialWS(p, "alice", "/ws/vnc/local/"+member, p.URL)
	must(t, err)
	defer ws.Close()
	send := rfbHandshake(t, ws)
	send([]byte{2, 0, 0, 1, 0, 0, 0, 0}) // SetEncodings: Raw only
	read := rfbReader(t, ws, "the looping viewer's console (want it served)")
	u16 := func(b []byte) int { return int(b[0])<<8 | int(b[1]) }
	// update reads one FramebufferUpdate of Raw rectangles and returns
	// the pixels it painted.
	update := func() (pixels int) {
		if h := read(4); h[0] != 0 {
			t.Fatalf("server message %d; want a FramebufferUpdate", h[0])
		} else {
			for range u16(h[2:]) {
				r := read(12)
				w, hh := u16(r[4:]), u16(r[6:])
				if enc := r[8:12]; enc[0]|enc[1]|enc[2]|enc[3] != 0 {
					t.Fatalf("encoding % x; want Raw only", enc)
				}
				read(w * hh * 4)
				pixels += w * hh
			}
		}
		return pixels
	}
	const loop = 4 * time.Second
	start := time.Now()
	whole, answers, screen := 0, 0, 0
	for time.Since(start) < loop {
		send([]byte{3, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}) // non-incremental, all of it
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		n := update()
		answers++
		if screen == 0 {
			screen = n // the first answer is the whole screen
		}
		if n >= screen {
			whole++
		}
	}
	elapsed := time.Since(start)
	t.Logf("%d answers, %d of them the whole screen (%d pixels), in %v", answers, whole, screen, elapsed.Round(time.Millisecond))
	if most := int(elapsed/time.Second) + 1; whole > most {
		t.Errorf("a viewer asking in a loop was sent its whole screen %d times in %v; want at most %d (once a second)", whole, elapsed.Round(time.Millisecond), most)
	}
	if answers < 2 {
		t.Errorf("%d answers in %v; want each request answered", answers, elapsed.Round(time.Millisecond))
	}
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
}
