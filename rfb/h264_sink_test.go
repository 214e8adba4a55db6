package rfb

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// chanSink is a VideoSink that passes each access unit it takes on, and
// takes none while full is set (a track that fell behind).
type chanSink struct {
	aus     chan accessUnit
	full    atomic.Bool
	refused atomic.Int32
}

func (s *chanSink) Video(au []byte, key bool, w, h int) bool {
	if s.full.Load() {
		s.refused.Add(1)
		return false
	}
	select {
	case s.aus <- accessUnit{data: au, key: key}:
		return true
	default:
		return false
	}
}

// TestHub_H264ToSink: a viewer whose video goes to a sink (a WebRTC
// track) gets the hub's access units there, from a key frame, and not
// one H.264 rectangle over its RFB connection, which still brings the
// still screen losslessly; a sink that cannot keep up rejoins at a key
// frame; a key frame asked for comes; once the sink is stopped the video
// comes over RFB again. Each encoder is told the pace it is fed at: 30
// a second while the sink takes the stream, 60 once it is gone. A viewer
// not yet on the screen has no video to tap.
func TestHub_H264ToSink(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, _ := connectVideo(t, d, "held")
	var starts atomic.Int32
	var told atomic.Int32 // the last encoder's frame rate
	hub.mu.Lock()
	hub.vid.start = func(w, h, fps int) (videoEncoder, error) {
		starts.Add(1)
		told.Store(int32(fps))
		return &heldEncoder{hold: new(atomic.Bool)}, nil
	}
	hub.vid.late = time.Hour
	hub.mu.Unlock()
	a, b := net.Pipe()
	go hub.Serve(context.Background(), a, true)
	t.Cleanup(func() { b.Close() })
	cc := &clientConn{Conn: b, hub: hub, server: a}
	sink := &chanSink{aus: make(chan accessUnit, 1000)}
	if _, _, err := cc.VideoTo(sink); !errors.Is(err, ErrNoViewer) {
		t.Fatalf("VideoTo before the handshake = %v; want ErrNoViewer", err)
	}
	c := dialVideo(t, b)
	stop, keyFrame, err := cc.VideoTo(sink)
	must(t, err)

	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	// next moves the screen until the sink has an access unit.
	next := func(what string) accessUnit {
		t.Helper()
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			move()
			select {
			case au := <-sink.aus:
				return au
			case <-time.After(20 * time.Millisecond):
			}
		}
		t.Fatalf("after 1 min: no access unit in the sink (%s)", what)
		return accessUnit{}
	}
	if au := next("the motion's first"); !au.key {
		t.Fatal("the sink's first access unit is not a key frame")
	}
	for range 3 {
		next("the motion")
	}
	still := screen(w, h, 5)
	must(t, d.picture(still))
	readUntil(t, c, "the still screen, pixel-exact, over RFB", func() bool { return bytes.Equal(c.fb.pix, still) })
	if len(c.h264) != 0 {
		t.Errorf("%d H.264 rectangles came over RFB to a viewer whose video goes to a sink; want none", len(c.h264))
	}

	// A sink that cannot take a frame rejoins at a new key frame.
	sink.full.Store(true)
	for sink.refused.Load() == 0 {
		move()
		time.Sleep(20 * time.Millisecond)
	}
	before := starts.Load()
	sink.full.Store(false)
	for len(sink.aus) > 0 {
		<-sink.aus
	}
	if au := next("after the sink fell behind"); !au.key {
		t.Error("after the sink could not take a frame, its next access unit is not a key frame")
	}
	if starts.Load() == before {
		t.Error("no new encoder (key frame) for the sink that fell behind")
	}
	// A key frame asked for (the browser lost packets).
	next("before a key frame is asked for")
	keyFrame()
	for key := false; !key; {
		key = next("a key frame asked for").key
	}

	if got := told.Load(); got != 30 {
		t.Errorf("the sink's encoder was told %d frames a second; want 30, the pace the stream keeps to for a sink (its bitrate is set for it)", got)
	}

	stop()
	readUntil(t, c, "the video over RFB again after the sink stopped", func() bool { move(); return len(c.h264) > 0 })
	// Its viewer alone may take 60 a second: a new encoder, told so (at
	// most a videoKeyEvery after the last).
	readUntil(t, c, "an encoder told 60 frames a second after the sink stopped", func() bool { move(); return told.Load() == 60 })
}

// TestHub_H264PaceTold: each encoder is told the pace the stream keeps
// to, its bitrate being set for it (h264Bitrate a second): 30 a second
// while a sink takes the stream, and, once the sink is gone, a new encoder
// told 60 for the viewers left in the stream, though none of them waits
// for a key frame.
func TestHub_H264PaceTold(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, "held")
	var told atomic.Int32 // the last encoder's frame rate
	hub.mu.Lock()
	hub.vid.start = func(w, h, fps int) (videoEncoder, error) {
		told.Store(int32(fps))
		return &heldEncoder{hold: new(atomic.Bool)}, nil
	}
	hub.vid.late = time.Hour
	hub.mu.Unlock()
	viewer := dialVideo(t, serve())
	a, b := net.Pipe()
	go hub.Serve(context.Background(), a, true)
	cc := &clientConn{Conn: b, hub: hub, server: a}
	dialVideo(t, b)
	sink := &chanSink{aus: make(chan accessUnit, 1000)}
	_, _, err := cc.VideoTo(sink)
	must(t, err)

	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	readUntil(t, viewer, "H.264 to the viewer and the sink", func() bool { move(); return len(viewer.h264) > 0 && len(sink.aus) > 0 })
	if got := told.Load(); got != 30 {
		t.Errorf("with a sink, the encoder was told %d frames a second; want 30", got)
	}
	b.Close() // the sink's viewer leaves
	readUntil(t, viewer, "an encoder told 60 frames a second once the sink was gone", func() bool { move(); return told.Load() == 60 })
}
