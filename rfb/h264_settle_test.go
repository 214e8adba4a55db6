package rfb

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// heldEncoder is a test's encoder: each screen comes back at once as a
// small access unit (the first a key frame), except while its test holds
// them: then an encode says so on entered (if nobody has yet) and waits
// for release.
type heldEncoder struct {
	hold    *atomic.Bool
	entered chan<- struct{}
	release <-chan struct{}
	frames  int
	encodes *atomic.Int32 // every encoder's frames, if set
}

// heldVideo is a hub whose encoders are heldEncoders, and one viewer of
// its H.264 stream.
type heldVideo struct {
	hub     *Hub
	d       *scriptedDesktop
	c       *testClient
	hold    atomic.Bool  // encodes wait while set
	starts  atomic.Int32 // encoders started
	encodes atomic.Int32 // screens encoded
	entered chan struct{}
	release func() // lets every held encode go, for good (at the test's end at the latest)
	x       int    // move's scroll
}

// move scrolls the desktop's whole screen 8 pixels further.
func (v *heldVideo) move(t testing.TB) {
	v.x = (v.x + 8) % (v.d.w - 16)
	must(t, v.d.picture(scrolled(v.d.w, v.d.h, v.x)))
}

// newHeldVideo connects a w×h scripted desktop to a hub encoding with
// heldEncoders (late, if set, is how long an encode may take) and dials
// one viewer of its stream.
func newHeldVideo(t testing.TB, w, h int, late time.Duration) *heldVideo {
	v := &heldVideo{d: newScriptedDesktop(t, w, h), entered: make(chan struct{}, 1)}
	out := make(chan struct{})
	v.release = sync.OnceFunc(func() { close(out) })
	t.Cleanup(v.release)
	var serve func() net.Conn
	v.hub, serve = connectVideo(t, v.d, "held")
	v.hub.mu.Lock()
	v.hub.vid.start = func(w, h, fps int) (videoEncoder, error) {
		v.starts.Add(1)
		return &heldEncoder{hold: &v.hold, entered: v.entered, release: out, encodes: &v.encodes}, nil
	}
	v.hub.vid.late = late
	v.hub.mu.Unlock()
	v.c = dialVideo(t, serve())
	return v
}

func (e *heldEncoder) encode(pix []byte) (accessUnit, error) {
	if e.hold.Load() {
		select {
		case e.entered <- struct{}{}:
		default:
		}
		<-e.release
	}
	e.frames++
	if e.encodes != nil {
		e.encodes.Add(1)
	}
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
	// This test's encode is slow, not late (TestHub_H264MotionWhileEncoderStuck).
	v := newHeldVideo(t, w, h, time.Hour)
	d, c := v.d, v.c

	move := func() { v.move(t) }
	readUntil(t, c, "the burst's first frames as H.264", func() bool { move(); return len(c.h264) >= 2 })

	// The motion goes on; the next screen's encode is held.
	v.hold.Store(true)
	for held := false; !held; {
		move()
		select {
		case <-v.entered:
			held = true
		case <-time.After(100 * time.Millisecond):
		}
	}
	still := screen(w, h, 5)
	must(t, d.picture(still))
	readUntil(t, c, "the still screen, pixel-exact, while the frame before is being encoded", func() bool { return bytes.Equal(c.fb.pix, still) })

	frames := len(c.h264)
	v.release()
	readUntil(t, c, "the held frame", func() bool { return len(c.h264) > frames })
	readUntil(t, c, "the still screen again after it, losslessly", func() bool { return c.tiled >= w*h })
	if !bytes.Equal(c.fb.pix, still) {
		t.Error("after the held frame, the screen is not the still one")
	}
}

// fill draws r in colour c, as one Raw rectangle.
func fill(d *scriptedDesktop, r Rect, c [3]byte) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 1}
	for _, v := range []int{r.X, r.Y, r.W, r.H} {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(encRaw))
	for range r.W * r.H {
		b = append(b, c[0], c[1], c[2], 0)
	}
	return d.write(b)
}

// TestHub_H264MotionWhileEncoderStuck: the encoder stops answering while
// the screen goes on moving (a video playing). A viewer in the stream,
// whose changes the stream holds for its next frame, leaves it for tiles
// once an encode is late (videoLate), so what changes on the screen
// meanwhile reaches it pixel-exact while that encode is still held; the
// stuck encoder is replaced (a new one started, the stuck one stopped),
// and once encoders answer again the viewer rejoins at the new one's key
// frame. Before, the viewer saw nothing until the motion ended or
// encodeTimeout (30 s) stopped the encoder and H.264 with it.
func TestHub_H264MotionWhileEncoderStuck(t *testing.T) {
	const w, h = 64, 48
	v := newHeldVideo(t, w, h, 0)
	d, c := v.d, v.c

	// The top half moves until the test ends: half the screen every 20 ms.
	stop := make(chan struct{})
	moved := make(chan struct{})
	go func() {
		defer close(moved)
		for i := 0; ; i++ {
			if fill(d, Rect{0, 0, w, h / 2}, [3]byte{byte(i), byte(i * 7), 90}) != nil {
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	stopMotion := sync.OnceFunc(func() { close(stop); <-moved })
	defer stopMotion()
	readUntil(t, c, "the motion as H.264", func() bool { return len(c.h264) >= 2 })

	// Every encode from now on is held, the replacement's first too.
	v.hold.Store(true)
	select {
	case <-v.entered:
	case <-time.After(time.Minute):
		t.Fatal("after 1 min no encode was held")
	}
	mark := [3]byte{250, 10, 200}
	must(t, typeAt(d, 8, 32, mark))
	readUntil(t, c, "a change in the moving screen as tiles while the encode is held", func() bool { return c.pixel(8, 32) == mark })
	readUntil(t, c, "the stuck encoder replaced while its encode is held", func() bool { return v.starts.Load() >= 2 })

	// Encoders answer again: the viewer rejoins the stream at a key frame
	// that resets its decoder.
	frames := len(c.h264)
	v.hold.Store(false)
	v.release()
	readUntil(t, c, "H.264 again", func() bool { return len(c.h264) > frames })
	if p := c.h264[frames]; p.flags&h264ResetContext == 0 || !accessUnits(t, p.data)[0].key {
		t.Errorf("the first frame after the stuck encoder: flags %d; want a key frame that resets the decoder", p.flags)
	}
	stopMotion()
	still := screen(w, h, 3)
	must(t, d.picture(still))
	readUntil(t, c, "the still screen, pixel-exact", func() bool { return bytes.Equal(c.fb.pix, still) })
}

// TestHub_H264EncoderProcessStuck: a real encoder process that stops
// answering mid-motion (here: stopped with SIGSTOP) is killed and
// replaced by a new process, and the viewer gets H.264 from it, starting
// at a key frame, rather than tiles for good after encodeTimeout.
func TestHub_H264EncoderProcessStuck(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, mustGStreamer(t))
	var mu sync.Mutex
	var pids []int
	hub.mu.Lock()
	hub.vid.start = func(w, h, fps int) (videoEncoder, error) {
		e, err := startEncoder(context.Background(), hub.vid.program, w, h, fps)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		defer mu.Unlock()
		pids = append(pids, e.pid)
		return e, nil
	}
	hub.mu.Unlock()
	c := dialVideo(t, serve())
	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	readUntil(t, c, "the motion as H.264", func() bool { move(); return len(c.h264) >= 2 })

	mu.Lock()
	stuck := pids[len(pids)-1]
	mu.Unlock()
	must(t, syscall.Kill(stuck, syscall.SIGSTOP))
	t.Cleanup(func() { syscall.Kill(stuck, syscall.SIGKILL) })
	frames := len(c.h264)
	readUntil(t, c, "the stopped encoder killed and reaped", func() bool {
		move()
		return syscall.Kill(stuck, 0) == syscall.ESRCH
	})
	reset := func(p h264Payload) bool { return p.flags&h264ResetContext != 0 }
	readUntil(t, c, "H.264 from a new encoder, starting again", func() bool {
		move()
		return slices.ContainsFunc(c.h264[frames:], reset)
	})
	if p := c.h264[frames+slices.IndexFunc(c.h264[frames:], reset)]; !accessUnits(t, p.data)[0].key {
		t.Error("the new encoder's first frame is not a key frame")
	}
	last := scrolled(w, h, x)
	readUntil(t, c, "the still screen, pixel-exact", func() bool { return bytes.Equal(c.fb.pix, last) })
}

// TestEncodePace: an encode is late after videoLate on a machine where
// encodes are quick, after lateFactor typical encodes where they are slow,
// and the bound grows after an encode was stopped as late.
func TestEncodePace(t *testing.T) {
	var p encodePace
	if b := p.bound(); b != videoLate {
		t.Errorf("before any encode: %v; want %v", b, videoLate)
	}
	p.note(time.Second, true) // a fresh process's first screen seeds it
	p.note(10*time.Millisecond, true)
	if b := p.bound(); b != lateFactor*time.Second {
		t.Errorf("after a first screen of 1s: %v; want %v", b, lateFactor*time.Second)
	}
	for range 100 {
		p.note(10*time.Millisecond, false)
	}
	if b := p.bound(); b != videoLate {
		t.Errorf("after quick encodes: %v; want %v", b, videoLate)
	}
	for range 100 {
		p.note(300*time.Millisecond, false)
	}
	if b := p.bound(); b < lateFactor*250*time.Millisecond {
		t.Errorf("after encodes of 300ms: %v; want about %v", b, lateFactor*300*time.Millisecond)
	}
	before := p.bound()
	p.note(before, false)
	if b := p.bound(); b <= before {
		t.Errorf("after an encode stopped at %v: %v; want more", before, b)
	}
}
