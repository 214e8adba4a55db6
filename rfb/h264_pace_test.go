package rfb

import (
	"net"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestFittingPace: the pace an encoder is told follows the pace its
// stream is fed at, when it moved by more than a fifth, down to a quarter
// of the fastest, only while the viewers hold the stream back (its
// changed screens wait for them); it goes back to the fastest once they
// wait for the stream (the encoder or the desktop is the slower) or the
// told pace keeps one waiting.
func TestFittingPace(t *testing.T) {
	for _, tt := range []struct {
		name                        string
		rate, heldShare, boundShare float64
		told, fastest, want         int
	}{
		{"KeepsUp", 58, 0, 0.8, 60, 60, 60},
		{"ALittleSlower", 52, 0, 0.8, 60, 60, 60},
		{"Slower", 35.4, 0, 0.7, 60, 60, 35},
		{"Half", 29, 0, 0.6, 60, 60, 29},
		{"SlowerThanAQuarter", 4, 0, 0.9, 60, 60, 15},
		{"EncoderSlower", 25, 0, 0.05, 60, 60, 60},
		{"ViewersHoldBackAThird", 25, 0, 0.35, 60, 60, 60},
		{"AtTheToldPace", 14.2, 0, 0.6, 15, 60, 15},
		{"StillHeldBackAThird", 14.2, 0, 0.35, 15, 60, 15},
		{"ALittleFaster", 17, 0.1, 0.6, 15, 60, 15},
		{"Faster", 18.7, 0.1, 0.6, 15, 60, 19},
		{"HeldBack", 18.7, 0.5, 0.6, 15, 60, 60},
		{"NowTheEncoderIsSlower", 12, 0, 0.1, 15, 60, 60},
		{"HeldAtTheFastest", 60, 0.5, 0, 60, 60, 60},
		{"SinkNeverWaits", 14, 0, 0, 30, 30, 30},
	} {
		if got := fittingPace(tt.rate, tt.heldShare, tt.boundShare, tt.told, tt.fastest); got != tt.want {
			t.Errorf("%s: fittingPace(%v, %v, %v, %d, %d) = %d; want %d", tt.name, tt.rate, tt.heldShare, tt.boundShare, tt.told, tt.fastest, got, tt.want)
		}
	}
}

// keyedEncoder is a test's encoder with x264's key frames: one every
// h264KeySeconds of frames at the pace it was told, the first one too;
// each encode takes slow.
type keyedEncoder struct {
	keyInt, frames int
	slow           time.Duration
}

func (e *keyedEncoder) encode(pix []byte) (accessUnit, error) {
	time.Sleep(e.slow)
	e.frames++
	if (e.frames-1)%e.keyInt == 0 {
		return accessUnit{data: []byte{0, 0, 0, 1, 0x67, 1, 0, 0, 0, 1, 0x68, 1, 0, 0, 0, 1, 0x65, 1}, key: true}, nil
	}
	return accessUnit{data: []byte{0, 0, 0, 1, 0x41, byte(e.frames)}}, nil
}

func (e *keyedEncoder) close() error { return nil }

// pacedHub connects a hub of a w×h desktop whose encoders are
// keyedEncoders taking slow a frame, and returns it, a function that
// serves it a client, the pace its last encoder was told and the paces
// of every encoder it started (read them under hub.mu).
func pacedHub(t *testing.T, d *scriptedDesktop, slow time.Duration) (*Hub, func() net.Conn, *atomic.Int32, *[]int) {
	t.Helper()
	hub, serve := connectVideo(t, d, "keyed")
	told := new(atomic.Int32)
	paces := new([]int)
	hub.mu.Lock()
	hub.vid.start = func(w, h, fps int) (videoEncoder, error) {
		told.Store(int32(fps))
		hub.mu.Lock()
		*paces = append(*paces, fps)
		hub.mu.Unlock()
		return &keyedEncoder{keyInt: h264KeySeconds * fps, slow: slow}, nil
	}
	hub.vid.late = time.Hour
	hub.mu.Unlock()
	return hub, serve, told, paces
}

// moveEvery has d's whole screen change every period until the test ends.
func moveEvery(t *testing.T, d *scriptedDesktop, w, h int, period time.Duration) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for x := 0; ; x = (x + 8) % (w - 16) {
			select {
			case <-stop:
				return
			case <-time.After(period):
			}
			if d.picture(scrolled(w, h, x)) != nil {
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
}

// TestHub_H264PaceFollowsViewer: the encoder is told the pace its stream
// is fed at while the viewer holds the stream back, its bitrate being set
// by the frame for it. A viewer that asks about 12 times a second while
// the screen changes every 5 ms gets, where the encoder told 60 would
// make its next key frame anyway, a new encoder told 15 (the slowest
// told); when the viewer then asks as fast as it can, a new one told 60
// at once, the pace told before keeping it waiting. Before, every encoder
// was told 60 without a sink, and a viewer taking 15 frames a second got
// a quarter of the budget a second.
func TestHub_H264PaceFollowsViewer(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, serve, told, paces := pacedHub(t, d, 0)
	c := dialVideo(t, serve())
	moveEvery(t, d, w, h, 5*time.Millisecond)
	readUntil(t, c, "H.264 from an encoder told 60", func() bool { return len(c.h264) > 0 && told.Load() == 60 })
	readUntil(t, c, "an encoder told 15 for a viewer that asks 12 times a second", func() bool {
		time.Sleep(time.Second / 12)
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
	readUntil(t, c, "an encoder told 60 again for a viewer that asks as fast as it can", func() bool { return told.Load() == 60 })
	hub.mu.Lock()
	defer hub.mu.Unlock()
	if want := []int{60, 15, 60}; !slices.Equal(*paces, want) {
		t.Errorf("encoders told %v; want %v: the fastest pace at once when the told one keeps the viewer waiting", *paces, want)
	}
}

// TestHub_H264PaceNotSlowedWhereTheViewerWaits: where the viewer waits
// for the stream's frames, the encoder keeps the fastest pace, however
// slow the stream: an encoder that takes 30 ms a frame (a busy machine's),
// or a desktop that changes 20 times a second, past where an encoder told
// 60 makes its next key frame (120 frames). A slower pace there gives
// each frame more bytes, which take longer to encode and send (session
// 36's measured pace, backed out: told the pace it measured, the encoder
// was told 32 and 20 here).
func TestHub_H264PaceNotSlowedWhereTheViewerWaits(t *testing.T) {
	for _, tt := range []struct {
		name         string
		slow, change time.Duration
	}{
		{"SlowEncoder", 30 * time.Millisecond, 5 * time.Millisecond},
		{"SlowDesktop", 0, time.Second / 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const w, h = 64, 48
			d := newScriptedDesktop(t, w, h)
			hub, serve, _, paces := pacedHub(t, d, tt.slow)
			c := dialVideo(t, serve())
			moveEvery(t, d, w, h, tt.change)
			frames := 0
			readUntil(t, c, "160 frames", func() bool {
				for _, p := range c.h264 {
					frames += len(accessUnits(t, p.data))
				}
				c.h264 = c.h264[:0]
				return frames >= 160
			})
			hub.mu.Lock()
			defer hub.mu.Unlock()
			if want := []int{60}; !slices.Equal(*paces, want) {
				t.Errorf("encoders told %v over %d frames; want %v: no slower pace while the viewer waits for frames", *paces, frames, want)
			}
		})
	}
}
