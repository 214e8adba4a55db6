package rfb

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestMotion_Step: each Picture choice's rule, change by change: Sharp
// never goes to video; Fast goes at the first change whose tiles cost
// more than a frame; Auto only after two changes in a row whose tiles
// cost more than two frames, a cheap change breaking the run; video ends
// at the first change after half a second with no costly one.
func TestMotion_Step(t *testing.T) {
	const frame = 1000
	type change struct {
		at    time.Duration
		tiles int
		video bool // want
		ended bool // want
	}
	for _, tc := range []struct {
		name    string
		mode    videoMode
		changes []change
	}{
		{"Sharp never", videoSharp, []change{{0, 50000, false, false}, {10 * time.Millisecond, 50000, false, false}}},
		{"Fast at the first costly change", videoFast, []change{{0, 900, false, false}, {10 * time.Millisecond, 1100, true, false}, {20 * time.Millisecond, 10, true, false}}},
		{"Auto after two in a row", videoAuto, []change{{0, 1500, false, false}, {10 * time.Millisecond, 2100, false, false}, {20 * time.Millisecond, 2100, true, false}}},
		{"Auto: a cheap change breaks the run", videoAuto, []change{{0, 2100, false, false}, {10 * time.Millisecond, 100, false, false}, {20 * time.Millisecond, 2100, false, false}, {30 * time.Millisecond, 2100, true, false}}},
		{"Auto: the run's pace does not matter", videoAuto, []change{{0, 2100, false, false}, {400 * time.Millisecond, 2100, true, false}, {800 * time.Millisecond, 2100, true, false}}},
		{"Auto: cheap changes go on as video, then it ends", videoAuto, []change{{0, 2100, false, false}, {10 * time.Millisecond, 2100, true, false}, {300 * time.Millisecond, 100, true, false}, {600 * time.Millisecond, 100, false, true}, {700 * time.Millisecond, 100, false, false}}},
		{"Auto: a gap starts a new run", videoAuto, []change{{0, 2100, false, false}, {time.Second, 2100, false, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var m motion
			t0 := time.Now()
			for i, c := range tc.changes {
				video, ended := m.step(tc.mode, c.tiles, frame, t0.Add(c.at))
				if video != c.video || ended != c.ended {
					t.Errorf("change %d (%d bytes as tiles at %v) = video %v, ended %v; want %v, %v", i, c.tiles, c.at, video, ended, c.video, c.ended)
				}
			}
		})
	}
}

// textScreen returns a w×h screen of text: 8×16 glyphs, black on white,
// each text line's characters picked by its number, scrolled so that
// line first is at the top: a terminal or a page scrolling.
func textScreen(w, h, first int) []byte {
	var glyphs [64][16]byte
	r := rand.New(rand.NewPCG(1, 2))
	for g := range glyphs {
		for row := 3; row < 13; row++ { // a blank line above and below
			glyphs[g][row] = byte(r.Uint32()) & 0x7e
		}
	}
	pix := bytes.Repeat([]byte{0xff, 0xff, 0xff, 0}, w*h)
	for y := 0; y < h; y++ {
		line := first + y/16
		for x := 0; x+8 <= w; x += 8 {
			g := glyphs[(line*31+x/8*7)%len(glyphs)]
			if line%5 == 4 || (x/8)%9 == 8 { // short lines, spaces
				continue
			}
			for b := 0; b < 8; b++ {
				if g[y%16]&(0x80>>b) != 0 {
					p := pix[(y*w+x+b)*4:]
					p[0], p[1], p[2] = 0, 0, 0
				}
			}
		}
	}
	return pix
}

// flat returns a w×h screen of one colour, another for each i.
func flat(w, h, i int) []byte {
	return bytes.Repeat([]byte{byte(40 * i), 0x80, byte(255 - 40*i), 0}, w*h)
}

// opaque zeroes the padding byte of pix's pixels, as the hub keeps them.
func opaque(pix []byte) []byte {
	for i := 3; i < len(pix); i += 4 {
		pix[i] = 0
	}
	return pix
}

// TestHub_PictureChoice: the hub weighs each change's cost as tiles
// (its own Tight encoder) against a video frame's (x264's own frames),
// for three viewers of one desktop, one per Picture choice. A whole
// screen that changes but costs little as tiles (flat colours: the rule
// this one replaced counted changed pixels and sent it as video) goes as
// tiles to all three; a video (a screen of noise each change) goes as
// video to Auto and Fast and as tiles to Sharp. The same at a quick pace
// and at a slow one (the old rule counted pixels per 250 ms window, so the
// machine's pace decided: a scrolling page went as video on one run and
// as tiles on another). Every viewer ends on the exact last screen.
func TestHub_PictureChoice(t *testing.T) {
	const w, h = 320, 200
	program := mustGStreamer(t)
	choices := []struct {
		name  string
		level int32
	}{{"Auto", 2}, {"Sharp", 1}, {"Fast", 9}}
	for _, work := range []struct {
		name    string
		picture func(i int) []byte
		video   map[string]bool // which choices get video
	}{
		{"a flat screen flipping colours", func(i int) []byte { return flat(w, h, i) }, map[string]bool{}},
		{"a video", func(int) []byte { return opaque(noise(w, h)) }, map[string]bool{"Auto": true, "Fast": true}},
	} {
		for _, pace := range []time.Duration{videoFrame, 200 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s every %v", work.name, pace), func(t *testing.T) {
				d := newScriptedDesktop(t, w, h)
				hub, serve := connectVideo(t, d, program)
				var clients []*testClient
				for _, c := range choices {
					tc := dialTestClient(t, serve(), append(videoEncodings, encCompressLevel0+c.level)...)
					tc.request(false)
					must(t, tc.next())
					clients = append(clients, tc)
				}
				// The changes, unread: each viewer's video waits for it
				// (well under the 4 MiB bound), its tiles merge.
				var last []byte
				for i := range 12 {
					last = work.picture(i)
					must(t, d.picture(last))
					time.Sleep(pace)
				}
				// Once every viewer's video has settled, all its frames
				// wait for it.
				for end := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
					hub.mu.Lock()
					busy := hub.videoActive()
					hub.mu.Unlock()
					if !busy {
						break
					}
					if time.Now().After(end) {
						t.Fatal("after 20s: the video goes on")
					}
				}
				for i, c := range clients {
					readUntil(t, c, choices[i].name+": the last screen, pixel-exact", func() bool { return bytes.Equal(c.fb.pix, last) })
					frames := 0
					for _, p := range c.h264 {
						frames += len(accessUnits(t, p.data))
					}
					t.Logf("%s: %d video frames, %d Tight and %d ZRLE rectangles", choices[i].name, frames, c.rects[encTight], c.rects[encZRLE])
					if want := work.video[choices[i].name]; (frames > 0) != want {
						t.Errorf("%s got %d video frames; want video %v", choices[i].name, frames, want)
					}
				}
			})
		}
	}
}

// TestTileCost_RealEncoders: the figures the rule weighs, from the real
// encoders on a laptop's screen, and Auto's answer: a screen of text
// scrolled a line at a time costs many times more as tiles than as x264's
// frames (which find the motion), so it goes as video, then settles to
// exact tiles; a flat screen changing colour costs less as tiles. (Noise,
// a video's worst case, is TestHub_PictureChoice's.)
func TestTileCost_RealEncoders(t *testing.T) {
	const w, h = 1280, 800
	e := mustEncoder(t, w, h)
	var p client
	all := Rect{0, 0, w, h}
	for _, tc := range []struct {
		name   string
		screen func(i int) []byte
		video  bool // want: Auto's margin crossed
	}{
		{"text scrolling", func(i int) []byte { return textScreen(w, h, i) }, true},
		{"flat colours", func(i int) []byte { return flat(w, h, i) }, false},
	} {
		tiles, frames := 0, 0
		const n = 5
		for i := range n {
			pix := tc.screen(i)
			tiles += p.tileCost(pix, all, 0)
			au, err := e.encode(pix)
			must(t, err)
			if i > 0 { // the first is a key frame
				frames += len(au.data)
			}
		}
		tiles, frames = tiles/n, frames/(n-1)
		t.Logf("%s: %d bytes a change as tiles, %d as a video frame", tc.name, tiles, frames)
		if got := tiles > autoMargin*frames; got != tc.video {
			t.Errorf("%s: tiles %d > %d × frame %d = %v; want %v", tc.name, tiles, autoMargin, frames, got, tc.video)
		}
	}
}
