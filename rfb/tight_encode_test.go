package rfb

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"testing"
)

// desktopLike is a w×h screen as a desktop shows one: a flat background;
// a window of two-colour text; a strip of anti-aliased text (40 greys); a
// photo (every pixel its own colour) in the corner.
func desktopLike(w, h int) []byte {
	rng := rand.New(rand.NewPCG(5, 6))
	pix := make([]byte, w*h*4)
	for y := range h {
		for x := range w {
			o := (y*w + x) * 4
			c := [3]byte{0x2f, 0x3b, 0x4c} // background
			switch {
			case x >= 100 && x < 700 && y >= 40 && y < 200: // text
				if (x/3+y/5)%4 == 0 {
					c = [3]byte{0, 0, 0}
				} else {
					c = [3]byte{255, 255, 255}
				}
			case x >= 100 && x < 700 && y >= 200 && y < 230: // anti-aliased
				g := byte(rng.IntN(40) * 6)
				c = [3]byte{g, g, g}
			case x >= w-150 && y >= h-90: // photo
				c = [3]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())}
			}
			copy(pix[o:], c[:])
		}
	}
	return pix
}

// serveScripted connects a hub to a scripted desktop showing pix and
// returns a function dialing the hub's clients with encodings encs.
func serveScripted(t *testing.T, w, h int, pix []byte) (*scriptedDesktop, func(encs ...int32) *testClient) {
	d := newScriptedDesktop(t, w, h)
	hub, err := Connect(d.peer)
	must(t, err)
	t.Cleanup(func() { hub.Close() })
	must(t, d.picture(pix))
	return d, func(encs ...int32) *testClient {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, false)
		t.Cleanup(func() { b.Close() })
		return dialTestClient(t, b, encs...)
	}
}

// TestHub_TightForClientsThatPreferIt: a client that lists Tight before
// ZRLE (noVNC's order) gets every rectangle as Tight and every pixel
// exact: the flat parts as fills (none wider than Tight's 2048), down to
// 16×16 blocks beside text, text as palettes, a photo as its pixels when no JPEG quality was
// asked for; one that lists ZRLE first gets ZRLE.
func TestHub_TightForClientsThatPreferIt(t *testing.T) {
	const w, h = 2200, 300 // a fill run longer than 2048; partial tiles
	pix := desktopLike(w, h)
	d, dial := serveScripted(t, w, h, pix)

	zrle := dial(encZRLE, encTight)
	for !bytes.Equal(zrle.fb.pix, pix) { // the hub has the picture
		zrle.request(false)
		must(t, zrle.next())
	}
	if zrle.rects[encTight] != 0 {
		t.Errorf("a client listing ZRLE first got %d Tight rectangles", zrle.rects[encTight])
	}

	c := dial(encTight, encZRLE, encLastRect)
	c.request(false)
	must(t, c.next())
	if !bytes.Equal(c.fb.pix, pix) {
		t.Fatal("the Tight client's screen differs from the desktop's")
	}
	if c.rects[encZRLE] != 0 || c.rects[encRaw] != 0 {
		t.Errorf("a client listing Tight first got other encodings: %v", c.rects)
	}
	// The flat parts come as fills, but for the 16×16 blocks around the
	// text (x 96–704, y 32–240) and the photo's (x 2048–2200, y 208–300).
	most := 608*208 + 152*92
	if notFilled := w*h - c.tight.filled; notFilled > most {
		t.Errorf("%d pixels came other than as fills; want at most %d", notFilled, most)
	}
	t.Logf("%d Tight rectangles; %d of %d pixels as fills", c.rects[encTight], c.tight.filled, w*h)

	// Changes after the first screen, through the same zlib streams: the
	// same exact pixels again.
	pix2 := desktopLike(w, h)
	for y := 100; y < 140; y++ { // the terminal scrolls, the corner goes flat
		copy(pix2[(y*w+120)*4:(y*w+600)*4], pix[((y+7)*w+120)*4:])
	}
	clear(pix2[((h-90)*w)*4:])
	must(t, d.picture(pix2))
	for range 10 {
		if bytes.Equal(c.fb.pix, pix2) {
			break
		}
		c.request(true)
		must(t, c.next())
	}
	if !bytes.Equal(c.fb.pix, pix2) {
		t.Error("after the desktop changed, the Tight client's screen differs from the desktop's")
	}
}

// TestTight_ManyRectanglesEndWithLastRect: an update whose tiles could
// overflow the 16-bit rectangle count ends with LastRect for a client
// that follows it, and goes as ZRLE to one that does not; both decode to
// the same pixels.
func TestTight_ManyRectanglesEndWithLastRect(t *testing.T) {
	defer func(n int) { maxUpdateRects = n }(maxUpdateRects)
	maxUpdateRects = 40
	const w, h = 640, 320 // 50 tiles
	pix := desktopLike(w, h)
	u := func(enc clientEncodings) *update {
		return &update{w: w, h: h, rects: []Rect{{0, 0, w, h}}, pix: [][]byte{pix}, pf: canonical, enc: enc}
	}
	decode := func(msg []byte) *testClient {
		a, b := net.Pipe()
		defer a.Close()
		go a.Write(msg)
		c := &testClient{t: t, conn: b, rects: map[int32]int{}}
		c.fb.resize(w, h)
		must(t, c.next())
		return c
	}
	msg := u(clientEncodings{tight: true, tightFirst: true, zrle: true, lastRect: true}).encode(&client{})
	if n := binary.BigEndian.Uint16(msg[2:]); n != 0xFFFF {
		t.Errorf("the update's count is %d; want 0xFFFF (ended by LastRect)", n)
	}
	c := decode(msg)
	if !bytes.Equal(c.fb.pix, pix) || c.rects[encLastRect] != 1 || c.rects[encTight] == 0 {
		t.Errorf("with LastRect: pixels exact %v, rectangles %v", bytes.Equal(c.fb.pix, pix), c.rects)
	}
	msg = u(clientEncodings{tight: true, tightFirst: true, zrle: true}).encode(&client{})
	c = decode(msg)
	if !bytes.Equal(c.fb.pix, pix) || c.rects[encZRLE] != 1 || c.rects[encTight] != 0 {
		t.Errorf("without LastRect: pixels exact %v, rectangles %v; want one ZRLE", bytes.Equal(c.fb.pix, pix), c.rects)
	}
}
