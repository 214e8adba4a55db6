package rfb

import (
	"bytes"
	"slices"
	"sync/atomic"
	"testing"
)

// TestModeOf: the compression level a viewer names is its Picture choice.
func TestModeOf(t *testing.T) {
	for level, want := range []videoMode{videoSharp, videoSharp, videoAuto, videoAuto, videoAuto, videoAuto, videoAuto, videoFast, videoFast, videoFast} {
		if got := modeOf(level); got != want {
			t.Errorf("modeOf(%d) = %v; want %v", level, got, want)
		}
	}
}

// TestHub_PictureChoice: three viewers of one desktop that all decode
// H.264, one per Picture choice (noVNC's compression level: Auto 2,
// Sharp 1, Fast 9). Typing goes as video to Fast only, a burst of large
// changes to Auto and Fast, nothing ever to Sharp; typing after the
// burst still goes to Fast only (Auto leaves the stream its decoder can
// no longer follow); each ends on the exact screen.
func TestHub_PictureChoice(t *testing.T) {
	const w, h = 320, 200
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, "held")
	var hold atomic.Bool
	hub.mu.Lock()
	hub.vid.start = func(w, h, fps int) (videoEncoder, error) { return &heldEncoder{hold: &hold}, nil }
	hub.mu.Unlock()
	dial := func(level int32) *testClient {
		c := dialTestClient(t, serve(), append(slices.Clone(videoEncodings), encCompressLevel0+level)...)
		c.request(false)
		must(t, c.next())
		return c
	}
	auto, sharp, fast := dial(2), dial(1), dial(9)
	viewers := []struct {
		name string
		c    *testClient
	}{{"Auto", auto}, {"Sharp", sharp}, {"Fast", fast}}
	counts := func() []int {
		n := make([]int, len(viewers))
		for i, v := range viewers {
			n[i] = len(v.c.h264)
		}
		return n
	}
	// got reports which viewers got H.264 since from.
	got := func(from []int) map[string]bool {
		m := map[string]bool{}
		for i, v := range viewers {
			m[v.name] = len(v.c.h264) > from[i]
		}
		return m
	}
	// still waits until every viewer has the exact screen pix.
	still := func(what string, pix []byte) {
		t.Helper()
		for _, v := range viewers {
			readUntil(t, v.c, v.name+": "+what+", pixel-exact", func() bool { return bytes.Equal(v.c.fb.pix, pix) })
		}
	}
	typing := func(what string) {
		t.Helper()
		from := counts()
		for i := range 8 {
			x, y, colour := 8*i, 40, [3]byte{byte(20 * i), 200, 100}
			must(t, typeAt(d, x, y, colour))
			for _, v := range viewers {
				n := len(v.c.h264)
				readUntil(t, v.c, v.name+": "+what, func() bool { return v.c.pixel(x, y) == colour || len(v.c.h264) > n })
			}
		}
		// Fast's keys can all land as tiles before its stream is up (the
		// first typing starts the encoder): it gets the typing as video
		// once the stream runs, and the others never do.
		readUntil(t, fast, what+" as video to Fast", func() bool { return len(fast.h264) > from[2] })
		if g := got(from); !g["Fast"] || g["Auto"] || g["Sharp"] {
			t.Errorf("%s: H.264 to %v; want to Fast only", what, g)
		}
		hub.mu.Lock()
		pix := hub.fb.get(Rect{0, 0, w, h}, nil)
		hub.mu.Unlock()
		still(what+": then the still screen", pix)
	}
	typing("typing")
	from, x := counts(), 0
	readUntil(t, auto, "a burst as video to Auto", func() bool {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
		return len(auto.h264) > from[0]+2
	})
	readUntil(t, fast, "the burst as video to Fast", func() bool { return len(fast.h264) > from[2] })
	still("after the burst", scrolled(w, h, x))
	if g := got(from); !g["Fast"] || !g["Auto"] || g["Sharp"] {
		t.Errorf("a burst: H.264 to %v; want to Auto and Fast", g)
	}
	typing("typing after the burst")
	if n := len(sharp.h264); n != 0 {
		t.Errorf("Sharp got %d H.264 rectangles; want none", n)
	}
}
