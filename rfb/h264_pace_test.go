package rfb

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestFittingPace: the pace an encoder is told follows the pace its
// stream is fed at, when it moved by more than a fifth, down to a quarter
// of the fastest, and goes back to the fastest once the told pace keeps a
// viewer waiting.
func TestFittingPace(t *testing.T) {
	for _, tt := range []struct {
		name                string
		rate, heldShare     float64
		told, fastest, want int
	}{
		{"KeepsUp", 58, 0, 60, 60, 60},
		{"ALittleSlower", 52, 0, 60, 60, 60},
		{"Slower", 35.4, 0, 60, 60, 35},
		{"Half", 29, 0, 60, 60, 29},
		{"SlowerThanAQuarter", 4, 0, 60, 60, 15},
		{"AtTheToldPace", 14.2, 0, 15, 60, 15},
		{"ALittleFaster", 17, 0.1, 15, 60, 15},
		{"Faster", 18.7, 0.1, 15, 60, 19},
		{"HeldBack", 18.7, 0.5, 15, 60, 60},
		{"HeldAtTheFastest", 60, 0.5, 60, 60, 60},
		{"SinkHalf", 14, 0, 30, 30, 14},
		{"SinkSlow", 2, 0, 30, 30, 8},
		{"SinkHeldBack", 9, 0.4, 8, 30, 30},
	} {
		if got := fittingPace(tt.rate, tt.heldShare, tt.told, tt.fastest); got != tt.want {
			t.Errorf("%s: fittingPace(%v, %v, %d, %d) = %d; want %d", tt.name, tt.rate, tt.heldShare, tt.told, tt.fastest, got, tt.want)
		}
	}
}

// keyedEncoder is a test's encoder with x264's key frames: one every
// h264KeySeconds of frames at the pace it was told, the first one too.
type keyedEncoder struct {
	keyInt, frames int
}

func (e *keyedEncoder) encode(pix []byte) (accessUnit, error) {
	e.frames++
	if (e.frames-1)%e.keyInt == 0 {
		return accessUnit{data: []byte{0, 0, 0, 1, 0x67, 1, 0, 0, 0, 1, 0x68, 1, 0, 0, 0, 1, 0x65, 1}, key: true}, nil
	}
	return accessUnit{data: []byte{0, 0, 0, 1, 0x41, byte(e.frames)}}, nil
}

func (e *keyedEncoder) close() error { return nil }

// TestHub_H264PaceFollowsViewer: the encoder is told the pace its stream
// is fed at, its bitrate being set by the frame for it. A viewer that asks
// about 12 times a second while the screen keeps moving gets, where the
// encoder told 60 would make its next key frame anyway, a new encoder told
// 15 (the slowest told); when the viewer then asks as fast as it can, a
// new one told 60 at once, the pace told before keeping it waiting. Before, every encoder was told 60 without a sink, and a viewer
// taking 15 frames a second got a quarter of the budget a second.
func TestHub_H264PaceFollowsViewer(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, "keyed")
	var told atomic.Int32 // the last encoder's pace
	var paces []int       // every encoder's, under hub.mu
	hub.mu.Lock()
	hub.vid.start = func(w, h, fps int) (videoEncoder, error) {
		told.Store(int32(fps))
		hub.mu.Lock()
		paces = append(paces, fps)
		hub.mu.Unlock()
		return &keyedEncoder{keyInt: h264KeySeconds * fps}, nil
	}
	hub.vid.late = time.Hour
	hub.mu.Unlock()
	c := dialVideo(t, serve())
	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	readUntil(t, c, "H.264 from an encoder told 60", func() bool { move(); return len(c.h264) > 0 && told.Load() == 60 })
	readUntil(t, c, "an encoder told 15 for a viewer that asks 12 times a second", func() bool {
		time.Sleep(time.Second / 12)
		move()
		return told.Load() == 15
	})
	// The new encoder's key frame comes where the old one's was due: after
	// its 120 frames (2 s at 60), not one of its own.
	frames := 0
	for i, p := range c.h264 {
		if i > 0 && p.flags&h264ResetContext != 0 {
			break
		}
		frames += len(accessUnits(t, p.data))
	}
	if want := h264KeySeconds * 60; frames != want {
		t.Errorf("the encoder told 15 came after %d frames of the one told 60; want %d, where its next key frame was due", frames, want)
	}
	readUntil(t, c, "an encoder told 60 again for a viewer that asks as fast as it can", func() bool { move(); return told.Load() == 60 })
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if want := []int{60, 15, 60}; !slices.Equal(paces, want) {
		t.Errorf("encoders told %v; want %v: the fastest pace at once when the told one keeps the viewer waiting", paces, want)
	}
}
