package rfb

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"net"
	"sync/atomic"
	"testing"
)

// countConn counts the bytes read from a connection.
type countConn struct {
	net.Conn
	n atomic.Int64
}

func (c *countConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// photoAndText is a w×h screen: a photo-like gradient left of x = split,
// two-colour "text" right of it.
func photoAndText(w, h, split int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	pix := make([]byte, 0, w*h*4)
	for y := range h {
		for x := range w {
			if x < split {
				n := byte(rng.IntN(8))
				pix = append(pix, byte(x*2)+n, byte(y*2)+n, byte(x+y)+n, 0)
			} else if (x/3+y/5)%4 == 0 {
				pix = append(pix, 0, 0, 0, 0)
			} else {
				pix = append(pix, 255, 255, 255, 0)
			}
		}
	}
	return pix
}

// TestHub_TightJPEGForPhotosOnly: a client that asks for a JPEG quality
// (as noVNC's Picture choice does) gets the photo-like part of the screen
// as Tight JPEG, close to the desktop's pixels and smaller at a lower
// quality, and the text part losslessly; a client that asks for none, or
// stops asking, gets every pixel exact.
func TestHub_TightJPEGForPhotosOnly(t *testing.T) {
	const w, h, photo = 320, 128, 128
	pix := photoAndText(w, h, photo)
	d := newScriptedDesktop(t, w, h)
	hub, err := Connect(d.peer)
	must(t, err)
	defer hub.Close()
	must(t, d.picture(pix))
	serve := func(encs ...int32) (*testClient, *countConn) {
		a, b := net.Pipe()
		go hub.Serve(context.Background(), a, false)
		t.Cleanup(func() { b.Close() })
		cc := &countConn{Conn: b}
		return dialTestClient(t, cc, encs...), cc
	}
	plain, _ := serve(encZRLE)
	for !bytes.Equal(plain.fb.pix, pix) { // the hub has the picture
		plain.request(false)
		must(t, plain.next())
	}
	if plain.rects[encTight] != 0 {
		t.Errorf("a client that asked for no JPEG quality got %d Tight rectangles", plain.rects[encTight])
	}

	// meanError is the mean difference per colour channel in the photo.
	meanError := func(c *testClient) float64 {
		sum := 0
		for y := range h {
			for x := range photo {
				o := (y*w + x) * 4
				for i := range 3 {
					sum += max(int(c.fb.pix[o+i])-int(pix[o+i]), int(pix[o+i])-int(c.fb.pix[o+i]))
				}
			}
		}
		return float64(sum) / float64(photo*h*3)
	}
	textExact := func(c *testClient) bool {
		for y := range h {
			o := (y*w + photo) * 4
			if !bytes.Equal(c.fb.pix[o:(y+1)*w*4], pix[o:(y+1)*w*4]) {
				return false
			}
		}
		return true
	}
	bytesAt := map[int]int64{}
	errAt := map[int]float64{}
	for _, level := range []int{8, 3} {
		c, cc := serve(encTight, encZRLE, encQualityLevel0+int32(level))
		before := cc.n.Load()
		c.request(false)
		must(t, c.next())
		bytesAt[level], errAt[level] = cc.n.Load()-before, meanError(c)
		if c.rects[encTight] == 0 {
			t.Fatalf("quality %d: no Tight rectangle (%v)", level, c.rects)
		}
		if !textExact(c) {
			t.Errorf("quality %d: the text part is not exact", level)
		}
		t.Logf("quality %d: %d bytes, mean error %.2f, rectangles %v", level, bytesAt[level], errAt[level], c.rects)

		// Asking for no quality again applies to the next update.
		msg := []byte{msgSetEncodings, 0, 0, 1}
		c.conn.Write(binary.BigEndian.AppendUint32(msg, uint32(encZRLE)))
		tight := c.rects[encTight]
		c.request(false)
		must(t, c.next())
		if c.rects[encTight] != tight || !bytes.Equal(c.fb.pix, pix) {
			t.Errorf("quality %d, then none: %d more Tight rectangles, pixels exact %v", level, c.rects[encTight]-tight, bytes.Equal(c.fb.pix, pix))
		}
	}
	if errAt[8] > 4 {
		t.Errorf("quality 8: mean error %.2f per channel; want at most 4", errAt[8])
	}
	if bytesAt[3] >= bytesAt[8] || errAt[3] <= errAt[8] {
		t.Errorf("quality 3 vs 8: %d vs %d bytes, error %.2f vs %.2f; want fewer bytes and more error", bytesAt[3], bytesAt[8], errAt[3], errAt[8])
	}
}

// TestSplit: the pieces of a rectangle cover it exactly once; JPEG pieces
// are exactly the photo tiles, at most 2048 wide, joined down the rows.
func TestSplit(t *testing.T) {
	const w, h = 4200, 150 // 66 × 3 tiles, the last ones partial
	photoTiles := func(tx, ty int) bool { return tx < 40 || (tx == 50 && ty < 2) }
	rng := rand.New(rand.NewPCG(3, 4))
	pix := make([]byte, w*h*4)
	for y := range h {
		for x := range w {
			if photoTiles(x/photoTile, y/photoTile) {
				o := (y*w + x) * 4
				pix[o], pix[o+1], pix[o+2] = byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())
			}
		}
	}
	parts := split(pix, Rect{0, 0, w, h})
	cover := make([]int, w*h)
	jpegs := 0
	for _, p := range parts {
		if p.jpeg {
			jpegs++
			if p.W > tightMaxWidth {
				t.Errorf("a JPEG piece %+v is wider than %d", p.Rect, tightMaxWidth)
			}
		}
		for y := p.Y; y < p.Y+p.H; y++ {
			for x := p.X; x < p.X+p.W; x++ {
				cover[y*w+x]++
				if p.jpeg != photoTiles(x/photoTile, y/photoTile) {
					t.Fatalf("piece %+v (jpeg %v) at (%d, %d)", p.Rect, p.jpeg, x, y)
				}
			}
		}
	}
	for i, n := range cover {
		if n != 1 {
			t.Fatalf("pixel (%d, %d) is in %d pieces", i%w, i/w, n)
		}
	}
	// Tiles 0–39 of each row: 0–31 (2048 px) and 32–39, each joined down
	// the three rows; tile 50 down two.
	if jpegs != 3 {
		t.Errorf("%d JPEG pieces: %+v; want 3", jpegs, parts)
	}
	if got := split(make([]byte, 64*64*4), Rect{0, 0, 64, 64}); len(got) != 1 || got[0].jpeg {
		t.Errorf("a flat tile: %+v; want itself, as ZRLE", got)
	}
}

// TestCompactLength: Tight's lengths, as the RFB specification gives them.
func TestCompactLength(t *testing.T) {
	for _, c := range []struct {
		n    int
		want []byte
	}{
		{0, []byte{0}}, {127, []byte{0x7f}}, {128, []byte{0x80, 0x01}},
		{16383, []byte{0xff, 0x7f}}, {16384, []byte{0x80, 0x80, 0x01}},
		{10000, []byte{0x90, 0x4e}}, {tightMaxLength, []byte{0xff, 0xff, 0xff}},
	} {
		if got := compactLength(c.n); !bytes.Equal(got, c.want) {
			t.Errorf("compactLength(%d) = % x; want % x", c.n, got, c.want)
		}
	}
}

// BenchmarkEncodePhoto: one 1280×800 update, a photo-like left half and
// text on the right, as ZRLE alone and with Tight JPEG at the Picture
// choice's two levels (Sharp 8, Fast 3): bytes a frame and time to encode.
func BenchmarkEncodePhoto(b *testing.B) {
	const w, h = 1280, 800
	benchEncode(b, w, h, photoAndText(w, h, w/2), []encodeCase{
		{"zrle", clientEncodings{zrle: true}},
		{"jpeg-8", clientEncodings{zrle: true, tight: true, jpeg: 9}},
		{"jpeg-3", clientEncodings{zrle: true, tight: true, jpeg: 4}},
	})
}

// encodeCase is a benchmark's client: its name and encodings.
type encodeCase struct {
	name string
	enc  clientEncodings
}

// benchEncode times encoding one full w×h update of pix for each case's
// client, reporting its bytes.
func benchEncode(b *testing.B, w, h int, pix []byte, cases []encodeCase) {
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			cl := &client{}
			u := &update{w: w, h: h, rects: []Rect{{0, 0, w, h}}, pix: [][]byte{pix}, pf: canonical, enc: c.enc}
			n := 0
			for b.Loop() {
				n = len(u.encode(cl))
			}
			b.ReportMetric(float64(n)/1024, "KiB/frame")
		})
	}
}
