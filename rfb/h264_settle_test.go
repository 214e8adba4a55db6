package rfb

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// heldEncoder is a test's encoder: each screen comes back at once as a
// small access unit (the first a key frame), except the one its test
// holds: that encode says so on entered and waits for release.
type heldEncoder struct {
	hold    *atomic.Bool
	entered chan<- struct{}
	release <-chan struct{}
	frames  int
}

func (e *heldEncoder) encode(pix []byte) (accessUnit, error) {
	if e.hold.CompareAndSwap(true, false) {
		e.entered <- struct{}{}
		<-e.release
	}
	e.frames++
	if e.frames == 1 {
		return accessUnit{data: []byte{0, 0, 0, 1, 0x67, 1, 0, 0, 0, 1, 0x68, 1, 0, 0, 0, 1, 0x65, 1}, key: true}, nil
	}
	return accessUnit{data: []byte{0, 0, 0, 1, 0x41, byte(e.frames)}}, nil
}

func (e *heldEncoder) close() error { return nil }

// TestHub_H264StillWhileEncoding: the screen goes still while the frame
// before is still being encoded (a loaded machine's encoder taking its
// time, or stuck). A viewer in the stream gets the still screen
// losslessly all the same, without waiting for that encode; when the
// frame comes after all, the still screen follows it again. Before, the
// motion ended only half a second after the encoder's last frame, so a
// live page stayed on the burst's last frame for as long as the encode
// took (docs/performance.md: the page that never got the still screen).
func TestHub_H264StillWhileEncoding(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, "held")
	var hold atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)
	hub.mu.Lock()
	hub.vid.start = func(w, h int) (videoEncoder, error) {
		return &heldEncoder{hold: &hold, entered: entered, release: release}, nil
	}
	hub.mu.Unlock()
	c := dialVideo(t, serve())

	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	readUntil(t, c, "the burst's first frames as H.264", func() bool { move(); return len(c.h264) >= 2 })

	// The motion goes on; the next screen's encode is held.
	hold.Store(true)
	for held := false; !held; {
		move()
		select {
		case <-entered:
			held = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	still := screen(w, h, 5)
	must(t, d.picture(still))
	readUntil(t, c, "the still screen, pixel-exact, while the frame before is being encoded", func() bool { return bytes.Equal(c.fb.pix, still) })

	frames := len(c.h264)
	let()
	readUntil(t, c, "the held frame", func() bool { return len(c.h264) > frames })
	readUntil(t, c, "the still screen again after it, losslessly", func() bool { return c.tiled >= w*h })
	if !bytes.Equal(c.fb.pix, still) {
		t.Error("after the held frame, the screen is not the still one")
	}
}
