package rfb

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"io"
)

// ZRLE (encoding 16): a rectangle is a 4-byte length and that much of one
// zlib stream that runs through the whole connection, each rectangle ending
// with a sync flush. Inside, 64×64 tiles left to right, top to bottom, each
// a subencoding byte: 0 raw, 1 solid, 2–16 a packed palette, 128 plain
// RLE, 130–255 palette RLE. Pixels are CPIXELs: 3 bytes for 24-bit colour
// in 32-bit pixels (PixelFormat.cpixel).

const zrleTile = 64

// maxZRLEData bounds one rectangle's compressed data: the largest
// framebuffer, raw, with zlib's worst-case overhead.
const maxZRLEData = maxDimension * maxDimension * 4

// zrleSource feeds the compressed bytes rectangle by rectangle to the one
// zlib reader of a connection. It is an io.ByteReader, so the reader never
// reads ahead of what the decoder asks for, and the next rectangle's bytes
// are simply appended.
type zrleSource struct {
	buf []byte
	off int
}

func (s *zrleSource) Read(p []byte) (int, error) {
	if s.off == len(s.buf) {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	return n, nil
}

func (s *zrleSource) ReadByte() (byte, error) {
	if s.off == len(s.buf) {
		return 0, io.ErrUnexpectedEOF
	}
	s.off++
	return s.buf[s.off-1], nil
}

// zrleDecoder decodes a connection's ZRLE rectangles into canonical pixels.
type zrleDecoder struct {
	src zrleSource
	z   io.ReadCloser
	one [1]byte
	px  [3 * zrleTile * zrleTile]byte
}

// decode reads r's ZRLE data from conn and writes r's pixels, row by row,
// into out (r.W*r.H*4 bytes).
func (d *zrleDecoder) decode(conn io.Reader, r Rect, out []byte) error {
	var n [4]byte
	if err := readFull(conn, n[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxZRLEData {
		return protocolErr("a ZRLE rectangle of %d bytes", size)
	}
	rest := d.src.buf[d.src.off:]
	d.src.buf = append(d.src.buf[:0], rest...)
	d.src.off = 0
	start := len(d.src.buf)
	d.src.buf = append(d.src.buf, make([]byte, size)...)
	if err := readFull(conn, d.src.buf[start:]); err != nil {
		return err
	}
	if d.z == nil {
		z, err := zlib.NewReader(&d.src)
		if err != nil {
			return protocolErr("ZRLE's zlib stream: %v", err)
		}
		d.z = z
	}
	for ty := 0; ty < r.H; ty += zrleTile {
		for tx := 0; tx < r.W; tx += zrleTile {
			t := Rect{tx, ty, min(zrleTile, r.W-tx), min(zrleTile, r.H-ty)}
			if err := d.tile(t, r.W, out); err != nil {
				if err == io.ErrUnexpectedEOF || err == io.EOF {
					return protocolErr("a ZRLE rectangle shorter than its tiles")
				}
				return err
			}
		}
	}
	return nil
}

func (d *zrleDecoder) byte() (byte, error) {
	err := readFull(d.z, d.one[:])
	return d.one[0], err
}

// pixels reads n CPIXELs.
func (d *zrleDecoder) pixels(n int) ([]byte, error) {
	b := d.px[:3*n]
	return b, readFull(d.z, b)
}

// runLength reads a run length: 1 plus bytes up to and including the first
// that is not 255.
func (d *zrleDecoder) runLength() (int, error) {
	n := 1
	for {
		b, err := d.byte()
		if err != nil {
			return 0, err
		}
		n += int(b)
		if b != 255 {
			return n, nil
		}
		if n > zrleTile*zrleTile {
			return 0, protocolErr("a ZRLE run longer than its tile")
		}
	}
}

// tile decodes tile t of a rectangle stride pixels wide into out.
func (d *zrleDecoder) tile(t Rect, stride int, out []byte) error {
	set := func(i int, c []byte) { // pixel i of the tile
		o := ((t.Y+i/t.W)*stride + t.X + i%t.W) * 4
		out[o], out[o+1], out[o+2], out[o+3] = c[0], c[1], c[2], 0
	}
	sub, err := d.byte()
	if err != nil {
		return err
	}
	count := t.W * t.H
	switch {
	case sub == 0:
		px, err := d.pixels(count)
		if err != nil {
			return err
		}
		for i := range count {
			set(i, px[3*i:])
		}
	case sub == 1:
		px, err := d.pixels(1)
		if err != nil {
			return err
		}
		for i := range count {
			set(i, px)
		}
	case sub <= 16:
		pal, err := d.pixels(int(sub))
		if err != nil {
			return err
		}
		pal = append([]byte(nil), pal...)
		bits := 4
		if sub == 2 {
			bits = 1
		} else if sub <= 4 {
			bits = 2
		}
		row := make([]byte, (t.W*bits+7)/8)
		for y := range t.H {
			if err := readFull(d.z, row); err != nil {
				return err
			}
			for x := range t.W {
				bit := x * bits
				idx := int(row[bit/8]>>(8-bits-bit%8)) & (1<<bits - 1)
				if idx >= int(sub) {
					return protocolErr("a ZRLE palette index %d of %d", idx, sub)
				}
				set(y*t.W+x, pal[3*idx:])
			}
		}
	case sub == 128 || sub >= 130:
		var pal []byte
		if sub >= 130 {
			p, err := d.pixels(int(sub) - 128)
			if err != nil {
				return err
			}
			pal = append([]byte(nil), p...)
		}
		for i := 0; i < count; {
			var c []byte
			n := 1
			if pal == nil {
				if c, err = d.pixels(1); err != nil {
					return err
				}
				if n, err = d.runLength(); err != nil {
					return err
				}
			} else {
				idx, err := d.byte()
				if err != nil {
					return err
				}
				if idx&128 != 0 {
					if n, err = d.runLength(); err != nil {
						return err
					}
				}
				idx &= 127
				if int(idx) >= len(pal)/3 {
					return protocolErr("a ZRLE palette index %d of %d", idx, len(pal)/3)
				}
				c = pal[3*int(idx):]
			}
			if i+n > count {
				return protocolErr("a ZRLE run past its tile")
			}
			for range n {
				set(i, c)
				i++
			}
		}
	default:
		return protocolErr("ZRLE subencoding %d", sub)
	}
	return nil
}

// zrleEncoder encodes one client's ZRLE rectangles: solid tiles, packed
// palettes of up to 16 colours, and raw tiles, through its zlib stream.
type zrleEncoder struct {
	out  bytes.Buffer
	z    *zlib.Writer
	tile []byte
}

// encode returns the ZRLE data (length included) of r's canonical pixels
// pix in format pf.
func (e *zrleEncoder) encode(pix []byte, r Rect, pf PixelFormat) []byte {
	e.out.Reset()
	e.out.Write([]byte{0, 0, 0, 0})
	if e.z == nil {
		e.z, _ = zlib.NewWriterLevel(&e.out, zlib.BestSpeed)
	}
	conv := converter(pf, true)
	for ty := 0; ty < r.H; ty += zrleTile {
		for tx := 0; tx < r.W; tx += zrleTile {
			t := Rect{tx, ty, min(zrleTile, r.W-tx), min(zrleTile, r.H-ty)}
			e.z.Write(e.encodeTile(pix, r.W, t, conv))
		}
	}
	e.z.Flush()
	b := e.out.Bytes()
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// encodeTile returns tile t's bytes, before zlib.
func (e *zrleEncoder) encodeTile(pix []byte, stride int, t Rect, conv func(dst, c []byte) []byte) []byte {
	var pal [16][3]byte
	n := 0
	idx := make([]byte, 0, t.W*t.H)
palette:
	for y := range t.H {
		o := ((t.Y+y)*stride + t.X) * 4
		for range t.W {
			c := [3]byte{pix[o], pix[o+1], pix[o+2]}
			o += 4
			i := 0
			for i < n && pal[i] != c {
				i++
			}
			if i == n {
				if n == 16 {
					n = 17
					break palette
				}
				pal[n] = c
				n++
			}
			idx = append(idx, byte(i))
		}
	}
	b := e.tile[:0]
	switch {
	case n == 1:
		b = conv(append(b, 1), pal[0][:])
	case n <= 16:
		b = append(b, byte(n))
		for i := range n {
			b = conv(b, pal[i][:])
		}
		bits := 4
		if n == 2 {
			bits = 1
		} else if n <= 4 {
			bits = 2
		}
		for y := range t.H {
			var acc, used byte
			for x := range t.W {
				acc |= idx[y*t.W+x] << (8 - byte(bits) - used)
				used += byte(bits)
				if used == 8 {
					b = append(b, acc)
					acc, used = 0, 0
				}
			}
			if used > 0 {
				b = append(b, acc)
			}
		}
	default:
		b = append(b, 0)
		for y := range t.H {
			o := ((t.Y+y)*stride + t.X) * 4
			for range t.W {
				b = conv(b, pix[o:o+3])
				o += 4
			}
		}
	}
	e.tile = b
	return b
}

// converter returns a func appending canonical colour c (R, G, B) as a
// pixel of pf: a CPIXEL when compact is set.
func converter(pf PixelFormat, compact bool) func(dst, c []byte) []byte {
	r, g, b, u := pf.layout()
	size := 4
	if compact {
		size = pf.cpixel()
	}
	if size == 3 && u == 3 && r == 0 && g == 1 && b == 2 { // canonical
		return func(dst, c []byte) []byte { return append(dst, c[0], c[1], c[2]) }
	}
	return func(dst, c []byte) []byte {
		var p [4]byte
		p[r], p[g], p[b] = c[0], c[1], c[2]
		if size == 3 {
			if u == 0 {
				return append(dst, p[1], p[2], p[3])
			}
			return append(dst, p[0], p[1], p[2])
		}
		return append(dst, p[:]...)
	}
}
