package rfb

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"testing"
)

// screens returns test pictures of w×h: one colour, a few colours (text on
// a background), and noise, in the canonical format.
func screens(w, h int) map[string][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	out := map[string][]byte{}
	fill := func(name string, at func(x, y int) [3]byte) {
		b := make([]byte, 0, w*h*4)
		for y := range h {
			for x := range w {
				c := at(x, y)
				b = append(b, c[0], c[1], c[2], 0)
			}
		}
		out[name] = b
	}
	fill("solid", func(int, int) [3]byte { return [3]byte{0x2f, 0x3e, 0x4e} })
	fill("two colours", func(x, y int) [3]byte { return [3]byte{byte((x / 3 % 2) * 255), 0, 0} })
	fill("text", func(x, y int) [3]byte { return [3]byte{byte(x * y % 7 * 30), byte(y % 3 * 80), 9} })
	fill("noise", func(int, int) [3]byte { return [3]byte{byte(rng.Uint32()), byte(rng.Uint32()), byte(rng.Uint32())} })
	return out
}

// TestZRLE_RoundTrip: what the encoder writes, through one zlib stream
// over several rectangles, the decoder reads back pixel for pixel, for
// sizes on and off the 64-pixel tile grid.
func TestZRLE_RoundTrip(t *testing.T) {
	var enc zrleEncoder
	var dec zrleDecoder
	for _, size := range [][2]int{{1, 1}, {64, 64}, {65, 3}, {130, 70}} {
		for name, pix := range screens(size[0], size[1]) {
			r := Rect{0, 0, size[0], size[1]}
			data := enc.encode(pix, r, canonical)
			got := make([]byte, len(pix))
			if err := dec.decode(bytes.NewReader(data), r, got); err != nil {
				t.Fatalf("%v %s: decode: %v", size, name, err)
			}
			if !bytes.Equal(got, pix) {
				t.Errorf("%v %s: the decoded pixels differ from the encoded ones", size, name)
			}
		}
	}
}

// zrleData is one rectangle's ZRLE data, from tile bytes before zlib.
func zrleData(tiles []byte) []byte {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(tiles)
	w.Flush()
	return append(binary.BigEndian.AppendUint32(nil, uint32(z.Len())), z.Bytes()...)
}

// TestZRLE_PlainAndPaletteRLE decodes the subencodings the encoder never
// writes (desktops do): plain RLE and palette RLE.
func TestZRLE_PlainAndPaletteRLE(t *testing.T) {
	red, blue := []byte{255, 0, 0}, []byte{0, 0, 255}
	tiles := append([]byte{128}, red...)
	tiles = append(tiles, 2) // a run of 3
	tiles = append(tiles, blue...)
	tiles = append(tiles, 0) // a run of 1
	var dec zrleDecoder
	got := make([]byte, 4*4)
	if err := dec.decode(bytes.NewReader(zrleData(tiles)), Rect{0, 0, 4, 1}, got); err != nil {
		t.Fatal(err)
	}
	want := []byte{255, 0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 0, 0, 255, 0}
	if !bytes.Equal(got, want) {
		t.Errorf("plain RLE decoded %v; want %v", got, want)
	}
	tiles = append([]byte{130}, red...)
	tiles = append(tiles, blue...)
	tiles = append(tiles, 1, 0|128, 1) // blue, then red for 2
	var fresh zrleDecoder
	if err := fresh.decode(bytes.NewReader(zrleData(tiles)), Rect{0, 0, 3, 1}, got[:12]); err != nil {
		t.Fatal(err)
	}
	want = []byte{0, 0, 255, 0, 255, 0, 0, 0, 255, 0, 0, 0}
	if !bytes.Equal(got[:12], want) {
		t.Errorf("palette RLE decoded %v; want %v", got[:12], want)
	}
}

// TestZRLE_BadInput: malformed data from a desktop is a protocol error,
// never a panic or a read past the rectangle.
func TestZRLE_BadInput(t *testing.T) {
	for name, tiles := range map[string][]byte{
		"unknown subencoding":    {17},
		"palette index too big":  {2, 1, 1, 1, 2, 2, 2, 0xff},
		"RLE past the tile":      {128, 1, 1, 1, 20},
		"palette RLE bad index":  {130, 1, 1, 1, 2, 2, 2, 5},
		"short raw tile":         {0, 1, 2},
		"run length that floods": append([]byte{128, 1, 1, 1}, bytes.Repeat([]byte{255}, 40)...),
	} {
		var dec zrleDecoder
		err := dec.decode(bytes.NewReader(zrleData(tiles)), Rect{0, 0, 4, 4}, make([]byte, 64))
		if !errors.Is(err, ErrProtocol) {
			t.Errorf("%s: err %v; want a protocol error", name, err)
		}
	}
	var dec zrleDecoder
	huge := binary.BigEndian.AppendUint32(nil, 1<<31)
	if err := dec.decode(bytes.NewReader(huge), Rect{0, 0, 4, 4}, make([]byte, 64)); !errors.Is(err, ErrProtocol) {
		t.Errorf("a 2 GiB rectangle: err %v; want a protocol error", err)
	}
}

// FuzzZRLEDecode: no tile bytes make the decoder panic.
func FuzzZRLEDecode(f *testing.F) {
	f.Add([]byte{1, 1, 2, 3}, uint8(4), uint8(4))
	f.Add([]byte{130, 1, 1, 1, 2, 2, 2, 0x81, 3}, uint8(70), uint8(2))
	f.Fuzz(func(t *testing.T, tiles []byte, w, h uint8) {
		var dec zrleDecoder
		r := Rect{0, 0, int(w), int(h)}
		dec.decode(bytes.NewReader(zrleData(tiles)), r, make([]byte, r.W*r.H*4))
	})
}

// TestConverter: pixels in another 32-bit format put each primary where
// the format says.
func TestConverter(t *testing.T) {
	for _, tc := range []struct {
		pf      PixelFormat
		compact bool
		want    []byte
	}{
		{canonical, true, []byte{1, 2, 3}},
		{canonical, false, []byte{1, 2, 3, 0}},
		{PixelFormat{BitsPerPixel: 32, Depth: 24, RedShift: 16, GreenShift: 8, BlueShift: 0}, false, []byte{3, 2, 1, 0}},
		{PixelFormat{BitsPerPixel: 32, Depth: 24, BigEndian: true, RedShift: 16, GreenShift: 8, BlueShift: 0}, false, []byte{0, 1, 2, 3}},
		{PixelFormat{BitsPerPixel: 32, Depth: 24, BigEndian: true, RedShift: 16, GreenShift: 8, BlueShift: 0}, true, []byte{1, 2, 3}},
		{PixelFormat{BitsPerPixel: 32, Depth: 24, RedShift: 24, GreenShift: 16, BlueShift: 8}, true, []byte{3, 2, 1}},
	} {
		if got := converter(tc.pf, tc.compact)(nil, []byte{1, 2, 3}); !bytes.Equal(got, tc.want) {
			t.Errorf("converter(%+v, %v)(1,2,3) = %v; want %v", tc.pf, tc.compact, got, tc.want)
		}
	}
}
