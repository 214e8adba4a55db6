package rfb

import (
	"bytes"
	"compress/zlib"
)

// Tight's lossless rectangles, as the hub sends them to a client that
// lists Tight before ZRLE (noVNC does, as TigerVNC's viewer does): its
// decoders take a rectangle's zlib data in one call and paint fills
// natively, where noVNC's ZRLE decoder inflates palette tiles a byte at a
// time (tens of milliseconds for a first screen).
//
// A rectangle is cut in 64×64 tiles. Runs of tiles of one colour, along a
// row and down the rows below, go as one fill, as do the flat 16×16
// blocks of the other tiles; a tile (or the rest of its row of blocks) of
// two colours as a bitmap; of up to 256 as a byte a pixel and its palette; of more, as
// JPEG when the client asked for a quality (split, in tight.go) or as its
// pixels. All go through one of Tight's four zlib streams: a stream's
// deflater is over a MiB, and a viewer would keep three.
const (
	tightFill = 0x80
	// tightMinToCompress: data shorter than this goes as it is.
	tightMinToCompress = 12
	tightFilterPalette = 1
	// tightPalette is the compression control of basic compression
	// through stream 0 with the palette filter named; tightCopy, with no
	// filter (copy).
	tightPalette = 0x40
	tightCopy    = 0x00

	// tightBlock is the side of the blocks a tile of many colours is
	// searched for flat parts in.
	tightBlock = 16
)

// tightEncoder is one client's Tight state: its zlib stream (each
// rectangle's part ending with a sync flush) and scratch space.
type tightEncoder struct {
	out  bytes.Buffer
	z    *zlib.Writer
	pal  palette
	data []byte
}

// compress returns data through the stream, up to a sync flush.
func (e *tightEncoder) compress(data []byte) []byte {
	e.out.Reset()
	if e.z == nil {
		e.z, _ = zlib.NewWriterLevel(&e.out, zlib.BestSpeed)
	}
	e.z.Write(data)
	e.z.Flush()
	return e.out.Bytes()
}

// updateWriter builds a FramebufferUpdate: its rectangles, counted.
type updateWriter struct {
	b []byte
	n int
}

// rect appends a rectangle's header.
func (w *updateWriter) rect(x, y, rw, rh int, enc int32) {
	w.n++
	w.b = append(w.b, byte(x>>8), byte(x), byte(y>>8), byte(y), byte(rw>>8), byte(rw), byte(rh>>8), byte(rh))
	w.b = append(w.b, byte(enc>>24), byte(enc>>16), byte(enc>>8), byte(enc))
}

// tightRects bounds the rectangles encode sends for r (every tile apart).
func tightRects(r Rect) int {
	return ((r.W + zrleTile - 1) / zrleTile) * ((r.H + zrleTile - 1) / zrleTile)
}

// encode appends r's canonical pixels pix (r.W a row) to w as Tight
// rectangles at r's place.
func (e *tightEncoder) encode(w *updateWriter, pix []byte, r Rect) {
	var fills fillRuns
	for ty := 0; ty < r.H; ty += zrleTile {
		th := min(zrleTile, r.H-ty)
		fills.startRow(ty, th)
		for tx := 0; tx < r.W; tx += zrleTile {
			t := Rect{tx, ty, min(zrleTile, r.W-tx), th}
			ok := e.pal.build(pix, r.W, t)
			if ok && e.pal.n == 1 {
				fills.cell(t.X, t.W, e.pal.colours[0])
				continue
			}
			fills.gap()
			e.mixed(w, pix, r, t, ok)
		}
		fills.endRow()
	}
	fills.emit(w, r.X, r.Y)
}

// mixed appends tile t of r, of more than one colour (its palette built;
// ok: it holds them): its 16×16 blocks of one colour as fills, the runs of
// others along each row of blocks as palettes or pixels. A desktop's
// window edges and lines of text leave most blocks of a tile flat, and
// each pixel not in a fill costs the browser's decoder.
func (e *tightEncoder) mixed(w *updateWriter, pix []byte, r, t Rect, ok bool) {
	var solid [zrleTile / tightBlock * zrleTile / tightBlock]uint32 // colour | 1<<24; 0: not solid
	any := false
	cols := (t.W + tightBlock - 1) / tightBlock
	for i := range solid[:cols*((t.H+tightBlock-1)/tightBlock)] {
		b := Rect{t.X + i%cols*tightBlock, t.Y + i/cols*tightBlock, 0, 0}
		b.W, b.H = min(tightBlock, t.X+t.W-b.X), min(tightBlock, t.Y+t.H-b.Y)
		if c, one := oneColour(pix, r.W, b); one {
			solid[i] = c | 1<<24
			any = true
		}
	}
	if !any {
		e.tile(w, pix, r, t, ok)
		return
	}
	var fills fillRuns
	for by := t.Y; by < t.Y+t.H; by += tightBlock {
		bh := min(tightBlock, t.Y+t.H-by)
		fills.startRow(by, bh)
		row := solid[(by-t.Y)/tightBlock*cols:]
		for i := 0; i < cols; {
			x := t.X + i*tightBlock
			if row[i] != 0 {
				fills.cell(x, min(tightBlock, t.X+t.W-x), row[i]&^(1<<24))
				i++
				continue
			}
			fills.gap()
			j := i + 1
			for j < cols && row[j] == 0 {
				j++
			}
			b := Rect{x, by, min(j*tightBlock, t.W) - i*tightBlock, bh}
			e.tile(w, pix, r, b, e.pal.build(pix, r.W, b))
			i = j
		}
		fills.endRow()
	}
	fills.emit(w, r.X, r.Y)
}

// oneColour reports whether block b of pix (stride pixels a row) is of one
// colour, and which.
func oneColour(pix []byte, stride int, b Rect) (uint32, bool) {
	o := (b.Y*stride + b.X) * 4
	first := [3]byte{pix[o], pix[o+1], pix[o+2]}
	for y := range b.H {
		o := ((b.Y+y)*stride + b.X) * 4
		for range b.W {
			if pix[o] != first[0] || pix[o+1] != first[1] || pix[o+2] != first[2] {
				return 0, false
			}
			o += 4
		}
	}
	return uint32(first[0]) | uint32(first[1])<<8 | uint32(first[2])<<16, true
}

// fillRuns joins the cells of one colour of a grid, row by row, into
// fills: a run along a row (at most Tight's 2048 wide), and a run with
// the same one on the row above.
type fillRuns struct {
	rects   []Rect
	colours []uint32
	above   map[fillRun]int // a run of the row above → its fill
	next    map[fillRun]int
	y, h    int
	open    fillRun
	isOpen  bool
}

// fillRun is a run of cells along a row: its place, width and colour.
type fillRun struct {
	x, w   int
	colour uint32
}

// startRow begins a row of cells at y, h high.
func (f *fillRuns) startRow(y, h int) {
	f.y, f.h = y, h
	f.next = map[fillRun]int{}
}

// cell adds a cell of colour c at x, w wide, after the row's last.
func (f *fillRuns) cell(x, w int, c uint32) {
	if f.isOpen && f.open.colour == c && f.open.x+f.open.w == x && f.open.w+w <= tightMaxWidth {
		f.open.w += w
		return
	}
	f.gap()
	f.open, f.isOpen = fillRun{x, w, c}, true
}

// gap ends the run under way, at a cell of more than one colour.
func (f *fillRuns) gap() {
	if !f.isOpen {
		return
	}
	f.isOpen = false
	if k, ok := f.above[f.open]; ok && f.rects[k].Y+f.rects[k].H == f.y {
		f.rects[k].H += f.h
		f.next[f.open] = k
		return
	}
	f.next[f.open] = len(f.rects)
	f.rects = append(f.rects, Rect{f.open.x, f.y, f.open.w, f.h})
	f.colours = append(f.colours, f.open.colour)
}

// endRow ends the row.
func (f *fillRuns) endRow() {
	f.gap()
	f.above = f.next
}

// emit appends the fills, their places relative to (ox, oy).
func (f *fillRuns) emit(w *updateWriter, ox, oy int) {
	for i, r := range f.rects {
		w.rect(ox+r.X, oy+r.Y, r.W, r.H, encTight)
		c := f.colours[i]
		w.b = append(w.b, tightFill, byte(c), byte(c>>8), byte(c>>16))
	}
}

// tile appends tile t (of r) as a palette rectangle when the palette
// holds its colours (ok), else as its pixels.
func (e *tightEncoder) tile(w *updateWriter, pix []byte, r, t Rect, ok bool) {
	w.rect(r.X+t.X, r.Y+t.Y, t.W, t.H, encTight)
	d := e.data[:0]
	switch {
	case ok && e.pal.n == 2:
		w.b = append(w.b, tightPalette, tightFilterPalette, 1)
		w.b = e.pal.appendColours(w.b)
		for y := range t.H {
			var acc, used byte
			for _, i := range e.pal.indices[y*t.W : (y+1)*t.W] {
				acc |= i << (7 - used)
				if used++; used == 8 {
					d = append(d, acc)
					acc, used = 0, 0
				}
			}
			if used > 0 {
				d = append(d, acc)
			}
		}
	case ok:
		w.b = append(w.b, tightPalette, tightFilterPalette, byte(e.pal.n-1))
		w.b = e.pal.appendColours(w.b)
		d = append(d, e.pal.indices...)
	default:
		w.b = append(w.b, tightCopy)
		for y := range t.H {
			o := ((t.Y+y)*r.W + t.X) * 4
			for range t.W {
				d = append(d, pix[o], pix[o+1], pix[o+2])
				o += 4
			}
		}
	}
	e.data = d
	if len(d) < tightMinToCompress {
		w.b = append(w.b, d...)
		return
	}
	z := e.compress(d)
	w.b = append(w.b, compactLength(len(z))...)
	w.b = append(w.b, z...)
}

// palette is a tile's colours, up to 256, and each pixel's index.
type palette struct {
	slots   [1024]uint32 // colour | 1<<24 (0: empty), open addressing
	index   [1024]byte
	colours [photoColours]uint32
	n       int
	indices []byte
}

// build collects tile t's colours (of pix, stride pixels a row) and its
// pixels' indices; it reports false, having stopped, past 256 colours.
func (p *palette) build(pix []byte, stride int, t Rect) bool {
	clear(p.slots[:])
	p.n = 0
	idx := p.indices[:0]
	defer func() { p.indices = idx }()
	last, lastIdx := uint32(0), byte(0)
	for y := range t.H {
		o := ((t.Y+y)*stride + t.X) * 4
		for range t.W {
			c := uint32(pix[o]) | uint32(pix[o+1])<<8 | uint32(pix[o+2])<<16 | 1<<24
			o += 4
			if c != last {
				i := (c * 2654435761) >> 22 // 10 bits
				for p.slots[i] != 0 && p.slots[i] != c {
					i = (i + 1) & 1023
				}
				if p.slots[i] == 0 {
					if p.n == len(p.colours) {
						return false
					}
					p.slots[i] = c
					p.index[i] = byte(p.n)
					p.colours[p.n] = c &^ (1 << 24)
					p.n++
				}
				last, lastIdx = c, p.index[i]
			}
			idx = append(idx, lastIdx)
		}
	}
	return true
}

// appendColours appends the palette as TPIXELs (R, G, B).
func (p *palette) appendColours(b []byte) []byte {
	for _, c := range p.colours[:p.n] {
		b = append(b, byte(c), byte(c>>8), byte(c>>16))
	}
	return b
}
