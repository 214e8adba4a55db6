package rfb

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"
)

// connectVideo connects a hub that encodes H.264 with program to d and
// returns it and a function that serves it one more client.
func connectVideo(t testing.TB, d *scriptedDesktop, program string) (*Hub, func() net.Conn) {
	t.Helper()
	hub, err := Connect(d.peer)
	must(t, err)
	hub.vid.program = program
	t.Cleanup(func() { hub.Close() })
	return hub, func() net.Conn {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, true)
		t.Cleanup(func() { b.Close() })
		return b
	}
}

// videoEncodings are what a client that decodes H.264 lists.
var videoEncodings = []int32{encH264, encTight, encZRLE, encExtendedDesktopSize}

// dialVideo dials a client listing videoEncodings and reads its first
// screen.
func dialVideo(t testing.TB, conn net.Conn) *testClient {
	t.Helper()
	c := dialTestClient(t, conn, videoEncodings...)
	c.request(false)
	must(t, c.next())
	return c
}

// accessUnits splits a payload into its access units, as noVNC does (up
// to and including each slice), each checked.
func accessUnits(t *testing.T, data []byte) []accessUnit {
	t.Helper()
	nals, err := splitNALs(data)
	must(t, err)
	var aus []accessUnit
	var check annexB
	check.sps, check.pps = []byte{0, 0, 0, 1, 0x67}, []byte{0, 0, 0, 1, 0x68}
	start := 0
	for i, n := range nals {
		if typ := n[startCodeLen(n)] & 0x1f; typ == nalSlice || typ == nalIDR {
			au, err := check.check(bytes.Join(nals[start:i+1], nil))
			must(t, err)
			aus = append(aus, au)
			start = i + 1
		}
	}
	if len(aus) == 0 || start != len(nals) {
		t.Fatalf("a payload of %d NAL units, %d access units, ends with no slice", len(nals), len(aus))
	}
	return aus
}

// readUntil has c ask for updates until done says so or a minute passes.
func readUntil(t testing.TB, c *testClient, what string, done func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !done(); {
		if time.Now().After(end) {
			t.Fatalf("after 1 min: want %s", what)
		}
		c.request(true)
		if err := c.next(); err != nil {
			t.Fatalf("want %s: %v", what, err)
		}
	}
}

// scrolled returns a w×h screen where every pixel depends on x: a page
// scrolled by x, a change as large as changes get.
func scrolled(w, h, x int) []byte {
	pix := make([]byte, w*h*4)
	for y := 0; y < h; y++ {
		for i := 0; i < w; i++ {
			p := pix[(y*w+i)*4:]
			p[0], p[1], p[2] = byte(i), byte(y+x), byte(x)
		}
	}
	return pix
}

// TestHub_H264: clients that ask for encoding 50 get one H.264 stream,
// encoded once: the first payload each gets is a key frame that resets its
// decoder, a client that joins later gets a key frame of its own, and once
// the screen is still the whole screen comes again as tiles, pixel-exact.
// A client that does not ask gets tiles only.
func TestHub_H264(t *testing.T) {
	const w, h = 320, 200
	d := newScriptedDesktop(t, w, h)
	_, serve := connectVideo(t, d, mustGStreamer(t))
	a := dialVideo(t, serve())
	tiles := dialTestClient(t, serve(), encTight, encZRLE, encExtendedDesktopSize)
	tiles.request(false)
	must(t, tiles.next())

	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	keyFirst := func(c *testClient, name string) {
		t.Helper()
		readUntil(t, c, name+" gets H.264", func() bool {
			if len(c.h264) == 0 {
				move()
			}
			return len(c.h264) > 0
		})
		p := c.h264[0]
		aus := accessUnits(t, p.data)
		if !aus[0].key || p.flags&h264ResetContext == 0 || p.r != (Rect{0, 0, w, h}) {
			t.Fatalf("%s's first H.264 rectangle %+v, flags %d: key %v; want a key frame of the whole screen that resets the decoder", name, p.r, p.flags, aus[0].key)
		}
	}
	keyFirst(a, "the first client")
	readUntil(t, a, "P frames after the key frame", func() bool { move(); return len(a.h264) >= 4 })
	for i, p := range a.h264[1:] {
		if aus := accessUnits(t, p.data); p.flags != 0 || aus[0].key {
			t.Fatalf("payload %d: flags %d, key %v; want P frames of the same stream", i+1, p.flags, aus[0].key)
		}
	}

	b := dialVideo(t, serve())
	keyFirst(b, "a client that joined later")

	// Still: the last picture, losslessly, on both.
	last := scrolled(w, h, x)
	for _, c := range []*testClient{a, b, tiles} {
		readUntil(t, c, "the still screen, pixel-exact", func() bool { return bytes.Equal(c.fb.pix, last) })
	}
	if n := tiles.rects[encH264]; n != 0 {
		t.Errorf("a client that did not ask for H.264 got %d H.264 rectangles", n)
	}
}

// TestHub_H264EncoderFails: where the encoder cannot run, clients that
// asked for H.264 get tiles.
func TestHub_H264EncoderFails(t *testing.T) {
	const w, h = 64, 48
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, "/nonexistent/gst-launch-1.0")
	c := dialVideo(t, serve())
	x := 0
	readUntil(t, c, "the hub to give up on the encoder", func() bool {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
		hub.mu.Lock()
		defer hub.mu.Unlock()
		return hub.vid.off
	})
	pic := screen(w, h, 8)
	must(t, d.picture(pic))
	readUntil(t, c, "the screen as tiles", func() bool { return bytes.Equal(c.fb.pix, pic) })
	if len(c.h264) != 0 {
		t.Errorf("%d H.264 rectangles from an encoder that cannot run", len(c.h264))
	}
}

// typeAt draws an 8×16 cell at x, y in colour c, as one Raw rectangle:
// the change a typed character makes.
func typeAt(d *scriptedDesktop, x, y int, c [3]byte) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 1}
	for _, v := range []int{x, y, 8, 16} {
		b = binary.BigEndian.AppendUint16(b, uint16(v))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(encRaw))
	for range 8 * 16 {
		b = append(b, c[0], c[1], c[2], 0)
	}
	return d.write(b)
}

// TestHub_H264Auto: video only while a large part of the screen changes
// fast. A viewer that asked for H.264 gets small changes (typing) as
// tiles, a burst of large ones as video, the exact screen once it is
// still, and small changes as tiles again; the next burst goes on the
// same stream (no new key frame: its decoder kept the last frame).
func TestHub_H264Auto(t *testing.T) {
	const w, h = 320, 200
	d := newScriptedDesktop(t, w, h)
	_, serve := connectVideo(t, d, mustGStreamer(t))
	c := dialVideo(t, serve())
	typing := func(what string) {
		t.Helper()
		from := len(c.h264)
		for i := range 30 {
			x, y, colour := 8*(i%38), 24+16*(i/38), [3]byte{byte(8 * i), 200, 100}
			must(t, typeAt(d, x, y, colour))
			readUntil(t, c, what, func() bool { return c.pixel(x, y) == colour })
		}
		if n := len(c.h264) - from; n != 0 {
			t.Errorf("%s: %d H.264 rectangles for small changes; want tiles only", what, n)
		}
	}
	burst := func(what string) h264Payload {
		t.Helper()
		from, x := len(c.h264), 0
		readUntil(t, c, what, func() bool {
			x = (x + 8) % (w - 16)
			must(t, d.picture(scrolled(w, h, x)))
			return len(c.h264) > from+2
		})
		last := scrolled(w, h, x)
		readUntil(t, c, what+": then the still screen, pixel-exact", func() bool { return bytes.Equal(c.fb.pix, last) })
		return c.h264[from]
	}
	typing("typing before any motion")
	if first := burst("a burst as video"); first.flags&h264ResetContext == 0 {
		t.Errorf("the first burst's first frame has flags %d; want a key frame that resets the decoder", first.flags)
	}
	typing("typing after the burst")
	if again := burst("a second burst as video"); again.flags != 0 || accessUnits(t, again.data)[0].key {
		t.Errorf("the second burst's first frame has flags %d; want a P frame of the same stream", again.flags)
	}
}

// TestHub_H264ViewersPace: the stream goes at its viewer's pace. While
// the one viewer in it has not asked again since its last frame, the
// screen goes on moving and at most one more screen is encoded (the one
// waiting for it); once it asks, frames come again. Before, the hub
// encoded a screen every videoFrame whether or not anyone took it, and
// the viewer got them queued together.
func TestHub_H264ViewersPace(t *testing.T) {
	const w, h = 64, 48
	v := newHeldVideo(t, w, h, time.Hour) // slow encodes are not late here
	c := v.c
	move := func() { v.move(t) }
	readUntil(t, c, "the burst's first frames as H.264", func() bool { move(); return len(c.h264) >= 2 })

	before := v.encodes.Load()
	for range 40 { // the viewer asks for nothing meanwhile
		move()
		time.Sleep(20 * time.Millisecond)
	}
	if n := v.encodes.Load() - before; n > 1 {
		t.Errorf("%d screens encoded while the only viewer in the stream did not ask; want at most 1 (the one waiting for it)", n)
	}
	frames := len(c.h264)
	readUntil(t, c, "H.264 again once the viewer asks", func() bool { move(); return len(c.h264) > frames+1 })
}

// TestNextFrame: a frame late by less than half a period does not push
// the next one back (the rate stays one a period); a later one, or one
// after a pause, is followed half a period after it.
func TestNextFrame(t *testing.T) {
	const p = 30 * time.Millisecond
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		name      string
		next, now time.Duration // after t0
		want      time.Duration
	}{
		{"OnTime", 0, 0, p},
		{"LateALittle", 0, 10 * time.Millisecond, p},
		{"LateMuch", 0, 25 * time.Millisecond, 25*time.Millisecond + p/2},
		{"AfterAPause", 0, 10 * time.Second, 10*time.Second + p/2},
	} {
		if got := nextFrame(t0.Add(tt.next), t0.Add(tt.now), p).Sub(t0); got != tt.want {
			t.Errorf("%s: nextFrame(+%v, +%v, %v) = +%v; want +%v", tt.name, tt.next, tt.now, p, got, tt.want)
		}
	}
}

// BenchmarkHub_VideoFrames: a viewer of a hub's H.264 stream that asks
// for the next update as soon as it has one, while the desktop's whole
// screen changes every millisecond and each encode is instant (a test's
// encoder): frames/s is the most the hub's own pace gives a viewer that
// keeps up, the encoder, the desktop and the network taking none of it.
func BenchmarkHub_VideoFrames(b *testing.B) {
	const w, h = 64, 48
	v := newHeldVideo(b, w, h, time.Hour)
	d, c := v.d, v.c
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // the desktop
		defer close(done)
		for x := 0; ; x = (x + 8) % (w - 16) {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			if d.picture(scrolled(w, h, x)) != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	readUntil(b, c, "H.264", func() bool { return len(c.h264) >= 2 })
	b.ResetTimer()
	start, n0 := time.Now(), len(c.h264)
	for range b.N { // a frame each
		n := len(c.h264)
		readUntil(b, c, "the next frame", func() bool { return len(c.h264) > n })
	}
	b.ReportMetric(float64(len(c.h264)-n0)/time.Since(start).Seconds(), "frames/s")
}
