package rfb

import (
	"bytes"
	"compress/zlib"
	"fmt"
	"image/jpeg"
	"io"
)

// tightDecoder is a Tight client's side for the tests, as the RFB
// specification has it: its four zlib streams run through the connection;
// a rectangle is a fill, a JPEG, or basic compression (copy or palette
// filter) whose data goes raw below 12 bytes.
type tightDecoder struct {
	src [4]zrleSource
	z   [4]io.ReadCloser
	// filled counts the pixels that came as fills.
	filled int
}

// decode reads one Tight rectangle r from conn as canonical pixels.
func (d *tightDecoder) decode(conn io.Reader, r Rect) ([]byte, error) {
	if r.W > tightMaxWidth {
		return nil, fmt.Errorf("a Tight rectangle %+v wider than %d", r, tightMaxWidth)
	}
	var ctl [1]byte
	if err := readFull(conn, ctl[:]); err != nil {
		return nil, err
	}
	for i := range 4 {
		if ctl[0]&(1<<i) != 0 {
			d.src[i], d.z[i] = zrleSource{}, nil
		}
	}
	pix := make([]byte, r.W*r.H*4)
	kind := ctl[0] >> 4
	switch {
	case kind == 8: // fill
		var c [3]byte
		if err := readFull(conn, c[:]); err != nil {
			return nil, err
		}
		for i := 0; i < len(pix); i += 4 {
			copy(pix[i:], c[:])
		}
		d.filled += r.W * r.H
		return pix, nil
	case kind == 9:
		data, err := readCompact(conn)
		if err != nil {
			return nil, err
		}
		return jpegPixels(data, r)
	case kind > 9:
		return nil, fmt.Errorf("Tight compression control %#x", ctl[0])
	}
	stream := int(kind & 3)
	filter := byte(0)
	if kind&4 != 0 {
		var f [1]byte
		if err := readFull(conn, f[:]); err != nil {
			return nil, err
		}
		filter = f[0]
	}
	var pal []byte
	size := r.W * r.H * 3
	switch filter {
	case 0:
	case tightFilterPalette:
		var n [1]byte
		if err := readFull(conn, n[:]); err != nil {
			return nil, err
		}
		pal = make([]byte, 3*(int(n[0])+1))
		if err := readFull(conn, pal); err != nil {
			return nil, err
		}
		size = r.W * r.H
		if len(pal) == 6 {
			size = (r.W + 7) / 8 * r.H
		}
	default:
		return nil, fmt.Errorf("Tight filter %d", filter)
	}
	data := make([]byte, size)
	if size < tightMinToCompress {
		if err := readFull(conn, data); err != nil {
			return nil, err
		}
	} else {
		z, err := readCompact(conn)
		if err != nil {
			return nil, err
		}
		s := &d.src[stream]
		s.buf = append(s.buf[s.off:], z...)
		s.off = 0
		if d.z[stream] == nil {
			if d.z[stream], err = zlib.NewReader(s); err != nil {
				return nil, err
			}
		}
		if err := readFull(d.z[stream], data); err != nil {
			return nil, fmt.Errorf("Tight zlib data of stream %d: %v", stream, err)
		}
	}
	for i := range r.W * r.H {
		var c []byte
		switch {
		case pal == nil:
			c = data[3*i:]
		case len(pal) == 6:
			x, y := i%r.W, i/r.W
			bit := data[y*((r.W+7)/8)+x/8] >> (7 - x%8) & 1
			c = pal[3*bit:]
		default:
			if int(data[i])*3 >= len(pal) {
				return nil, fmt.Errorf("palette index %d of %d", data[i], len(pal)/3)
			}
			c = pal[3*int(data[i]):]
		}
		copy(pix[4*i:4*i+3], c[:3])
	}
	return pix, nil
}

// readCompact reads a compact length and that much data.
func readCompact(conn io.Reader) ([]byte, error) {
	var b [1]byte
	n := 0
	for i := range 3 {
		if err := readFull(conn, b[:]); err != nil {
			return nil, err
		}
		if i == 2 {
			n |= int(b[0]) << 14
			break
		}
		n |= int(b[0]&0x7f) << (7 * i)
		if b[0]&0x80 == 0 {
			break
		}
	}
	data := make([]byte, n)
	return data, readFull(conn, data)
}

// jpegPixels decodes a JPEG of rectangle r as canonical pixels.
func jpegPixels(data []byte, r Rect) ([]byte, error) {
	img, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	if img.Bounds().Dx() != r.W || img.Bounds().Dy() != r.H {
		return nil, fmt.Errorf("a %v JPEG in rectangle %+v", img.Bounds(), r)
	}
	pix := make([]byte, 0, r.W*r.H*4)
	for y := range r.H {
		for x := range r.W {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			pix = append(pix, byte(cr>>8), byte(cg>>8), byte(cb>>8), 0)
		}
	}
	return pix, nil
}
