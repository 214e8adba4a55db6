package relay

// Tight rectangles (encoding 7), as the RFB clipboard filter follows them:
// a compression-control byte, then a fill pixel, a JPEG, or basic
// compression with an optional filter and data that is sent raw when
// shorter than 12 bytes and zlib-compressed with a compact length
// otherwise. The filter never decompresses anything.

// tight follows the compression-control byte.
func (f *rfbFilter) tight(h []byte) error {
	s := &f.down.stream
	f.mu.Lock()
	tp := int64(f.pf.tight)
	f.mu.Unlock()
	w, hh := f.rectW, f.rectH
	c := h[0] >> 4
	switch {
	case c == 8: // fill
		s.emit(h)
		s.skip(tp, false)
		return f.rectDone()
	case c == 9 || c == 10: // JPEG, PNG
		s.emit(h)
		return s.next(1, f.tightLength)
	case c > 10:
		return errRFB("Tight compression control %#x", h[0])
	case c&4 == 0: // basic, no filter: copy
		s.emit(h)
		return f.tightData(w * hh * tp)
	}
	return s.more(2, func(h []byte) error {
		switch h[1] {
		case 0, 2: // copy, gradient
			s.emit(h)
			return f.tightData(w * hh * tp)
		case 1: // palette
			return s.more(3, func(h []byte) error {
				colours := int(h[2]) + 1
				return s.more(3+colours*int(tp), func(h []byte) error {
					s.emit(h)
					if colours == 2 {
						return f.tightData((w + 7) / 8 * hh)
					}
					return f.tightData(w * hh)
				})
			})
		}
		return errRFB("Tight filter %d", h[1])
	})
}

// tightData follows n bytes of uncompressed data: raw below 12 bytes, else
// a compact length and that much zlib data.
func (f *rfbFilter) tightData(n int64) error {
	s := &f.down.stream
	if n < 12 {
		s.skip(n, false)
		return f.rectDone()
	}
	return s.next(1, f.tightLength)
}

// tightLength follows a compact length (1 to 3 bytes, 7 bits each) and
// the data it announces.
func (f *rfbFilter) tightLength(h []byte) error {
	s := &f.down.stream
	last := len(h) - 1
	if h[last]&0x80 != 0 && len(h) < 3 {
		return s.more(len(h)+1, f.tightLength)
	}
	n := int64(h[0] & 0x7f)
	if len(h) > 1 {
		n |= int64(h[1]&0x7f) << 7
	}
	if len(h) > 2 {
		n |= int64(h[2]) << 14
	}
	s.emit(h)
	s.skip(n, false)
	return f.rectDone()
}
