package rfb

// Rect is a rectangle of the framebuffer.
type Rect struct{ X, Y, W, H int }

// empty reports whether r covers no pixel.
func (r Rect) empty() bool { return r.W <= 0 || r.H <= 0 }

// covers reports whether o lies within r.
func (r Rect) covers(o Rect) bool {
	return o.X >= r.X && o.Y >= r.Y && o.X+o.W <= r.X+r.W && o.Y+o.H <= r.Y+r.H
}

// union returns the smallest rectangle covering r and o.

func (r Rect) union(o Rect) Rect {
	if r.empty() {
		return o
	}
	if o.empty() {
		return r
	}
	x0, y0 := min(r.X, o.X), min(r.Y, o.Y)
	x1, y1 := max(r.X+r.W, o.X+o.W), max(r.Y+r.H, o.Y+o.H)
	return Rect{x0, y0, x1 - x0, y1 - y0}
}

// clip returns the part of r inside a w×h framebuffer.
func (r Rect) clip(w, h int) Rect {
	x0, y0 := max(r.X, 0), max(r.Y, 0)
	x1, y1 := min(r.X+r.W, w), min(r.Y+r.H, h)
	if x1 <= x0 || y1 <= y0 {
		return Rect{}
	}
	return Rect{x0, y0, x1 - x0, y1 - y0}
}

// inside reports whether r lies wholly in a w×h framebuffer.
func (r Rect) inside(w, h int) bool {
	return r.X >= 0 && r.Y >= 0 && r.W >= 0 && r.H >= 0 && r.X+r.W <= w && r.Y+r.H <= h
}

// framebuffer is the desktop's screen in the canonical pixel format, 4
// bytes a pixel. The hub guards it with its lock.
type framebuffer struct {
	w, h int
	pix  []byte
}

// resize makes the framebuffer w×h and black: after a size change the
// desktop sends the whole screen again.
func (fb *framebuffer) resize(w, h int) {
	fb.w, fb.h = w, h
	if n := w * h * 4; cap(fb.pix) >= n {
		fb.pix = fb.pix[:n]
		clear(fb.pix)
	} else {
		fb.pix = make([]byte, n)
	}
}

// put writes src, r's pixels row by row, into the framebuffer; r is inside.
func (fb *framebuffer) put(r Rect, src []byte) {
	for row := range r.H {
		o := ((r.Y+row)*fb.w + r.X) * 4
		copy(fb.pix[o:o+r.W*4], src[row*r.W*4:])
	}
}

// copyRect copies the w×h pixels at (sx, sy) to r; both are inside.
func (fb *framebuffer) copyRect(r Rect, sx, sy int) {
	stride := fb.w * 4
	rowCopy := func(row int) {
		d := (r.Y+row)*stride + r.X*4
		s := (sy+row)*stride + sx*4
		copy(fb.pix[d:d+r.W*4], fb.pix[s:s+r.W*4]) // copy is memmove
	}
	if r.Y > sy { // overlapping downwards: bottom row first
		for row := r.H - 1; row >= 0; row-- {
			rowCopy(row)
		}
		return
	}
	for row := range r.H {
		rowCopy(row)
	}
}

// get returns a copy of r's pixels, row by row; r is inside.
func (fb *framebuffer) get(r Rect, dst []byte) []byte {
	dst = dst[:0]
	for row := range r.H {
		o := ((r.Y+row)*fb.w + r.X) * 4
		dst = append(dst, fb.pix[o:o+r.W*4]...)
	}
	return dst
}
