package rfb

import (
	"bytes"
	"image"
	"image/jpeg"
)

// Tight (encoding 7), as the hub sends it: only its JPEG subencoding, for
// the photo-like parts of the screen of a client that asked for a JPEG
// quality (pseudo-encodings -32 to -23, noVNC's Picture choice). Text and
// flat areas stay ZRLE, lossless, as TigerVNC keeps them.
const (
	encTight         int32 = 7
	encQualityLevel0 int32 = -32
	encQualityLevel9 int32 = -23

	// tightJPEG is the compression-control byte of a JPEG rectangle.
	tightJPEG = 0x90
	// tightMaxWidth is the widest rectangle Tight allows.
	tightMaxWidth = 2048
	// tightMaxLength is the most a compact length can say (22 bits).
	tightMaxLength = 1<<22 - 1

	// photoColours: a tile with more distinct colours than this is a
	// photo's or a gradient's (TigerVNC's line for a tile with JPEG on:
	// its area over 16, at most Tight's 256-colour palette); text, even
	// anti-aliased on a gradient title bar, has fewer.
	photoColours = 256
	// photoTile is the side of the tiles classified (ZRLE's own).
	photoTile = zrleTile
	// maxParts bounds the pieces of one rectangle (a screen of photo and
	// text tiles in turn), so an update's count stays within 16 bits.
	maxParts = 1024
)

// jpegQuality maps a Tight quality level (0–9) to a JPEG quality, as
// TigerVNC's TightJPEGEncoder does.
var jpegQuality = [10]int{15, 29, 41, 42, 62, 77, 79, 86, 92, 100}

// part is a piece of a rectangle to send on its own: as JPEG or ZRLE.
type part struct {
	Rect
	jpeg bool
}

// split returns r's pieces (relative to r) for a client that takes JPEG:
// runs of photo tiles along each row of tiles, at most tightMaxWidth wide
// and joined with the same run on the rows below, as JPEG; the rest as
// ZRLE runs. With no photo tile it is r whole, as ZRLE.
func split(pix []byte, r Rect) []part {
	cols := (r.W + photoTile - 1) / photoTile
	var parts []part
	var set palette
	above := map[[2]int]int{} // a JPEG run's X and W → its index in parts, on the last row
	photos := false
	for ty := 0; ty < r.H; ty += photoTile {
		th := min(photoTile, r.H-ty)
		row := make([]bool, cols)
		for i := range cols {
			t := Rect{i * photoTile, ty, min(photoTile, r.W-i*photoTile), th}
			row[i] = !set.build(pix, r.W, t) // more than photoColours
			photos = photos || row[i]
		}
		next := map[[2]int]int{}
		for i := 0; i < cols; {
			j := i + 1
			for j < cols && row[j] == row[i] && (!row[i] || (j-i)*photoTile < tightMaxWidth) {
				j++
			}
			x, w := i*photoTile, min(j*photoTile, r.W)-i*photoTile
			k, ok := above[[2]int{x, w}]
			if row[i] && ok && parts[k].Y+parts[k].H == ty {
				parts[k].H += th
				next[[2]int{x, w}] = k
			} else {
				if row[i] {
					next[[2]int{x, w}] = len(parts)
				}
				parts = append(parts, part{Rect{x, ty, w, th}, row[i]})
			}
			i = j
		}
		above = next
	}
	if !photos || len(parts) > maxParts {
		return []part{{Rect: Rect{0, 0, r.W, r.H}}}
	}
	return parts
}

// jpegRect returns a Tight JPEG rectangle's data for canonical pixels pix
// (w×h) at quality level q, or false when it would not fit a compact
// length.
func jpegRect(pix []byte, w, h, q int) ([]byte, bool) {
	img := &image.RGBA{Pix: pix, Stride: w * 4, Rect: image.Rect(0, 0, w, h)} // the padding byte is ignored
	var buf bytes.Buffer
	buf.Write([]byte{tightJPEG, 0, 0, 0})
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: jpegQuality[q]}); err != nil {
		return nil, false
	}
	b := buf.Bytes()
	n := len(b) - 4
	if n > tightMaxLength {
		return nil, false
	}
	l := compactLength(n)
	copy(b[4-len(l):], l)
	b = b[4-len(l)-1:]
	b[0] = tightJPEG
	return b, true
}

// compactLength is Tight's length: 7 bits a byte, low first, the top bit
// set on every byte but the last; at most 3 bytes.
func compactLength(n int) []byte {
	switch {
	case n < 1<<7:
		return []byte{byte(n)}
	case n < 1<<14:
		return []byte{byte(n) | 0x80, byte(n >> 7)}
	default:
		return []byte{byte(n) | 0x80, byte(n>>7) | 0x80, byte(n >> 14)}
	}
}

// subPixels returns part p of pix (stride pixels a row) as its own pixels.
func subPixels(pix []byte, stride int, p Rect) []byte {
	if p.X == 0 && p.W == stride {
		return pix[p.Y*stride*4 : (p.Y+p.H)*stride*4]
	}
	out := make([]byte, 0, p.W*p.H*4)
	for y := p.Y; y < p.Y+p.H; y++ {
		o := (y*stride + p.X) * 4
		out = append(out, pix[o:o+p.W*4]...)
	}
	return out
}
