package relay

// rfbStream walks one direction of an RFB byte stream message by message
// and writes what may pass. A message is read as a header (collected whole,
// then handed to a step that decides) followed by payload spans that are
// passed or dropped as they stream by, so that payloads are never held in
// memory. A step either asks for more header (more) or, done with this
// header, emits what it wants, queues spans (skip) and names the next
// header (next).
type rfbStream struct {
	hdr    []byte
	want   int
	step   func(h []byte) error
	spans  []rfbSpan
	out    []byte
	opaque bool // past a point the stream cannot be followed: pass it all
	// boundary is set by the filter at the start of a message and cleared
	// by its first byte: where a message of the filter's own may go.
	boundary bool
}

// rfbSpan is payload to pass or drop.
type rfbSpan struct {
	n    int64
	drop bool
}

// maxRFBHeader bounds a header the filter collects (SetEncodings lists,
// screen layouts, Tight palettes); longer is refused as malformed.
const maxRFBHeader = 64 << 10

// feed consumes p and returns the bytes that pass, valid until the next
// call. An error means the stream cannot be followed and must end.
func (s *rfbStream) feed(p []byte) ([]byte, error) {
	s.out = s.out[:0]
	for len(p) > 0 {
		if s.opaque {
			s.out = append(s.out, p...)
			break
		}
		if len(s.spans) > 0 {
			sp := &s.spans[0]
			n := int(min(sp.n, int64(len(p))))
			if !sp.drop {
				s.out = append(s.out, p[:n]...)
			}
			sp.n -= int64(n)
			p = p[n:]
			if sp.n == 0 {
				s.spans = s.spans[1:]
			}
			continue
		}
		n := min(s.want-len(s.hdr), len(p))
		s.hdr = append(s.hdr, p[:n]...)
		s.boundary = false
		p = p[n:]
		if len(s.hdr) == s.want {
			if err := s.step(s.hdr); err != nil {
				return nil, err
			}
		}
	}
	return s.out, nil
}

// more asks for the header to be n bytes long in all, then step again.
func (s *rfbStream) more(n int, step func(h []byte) error) error {
	if n > maxRFBHeader {
		return errRFB("a header of %d bytes", n)
	}
	s.want, s.step = n, step
	if len(s.hdr) == n { // nothing more to wait for (a layout of no screens, a fence without data)
		return step(s.hdr)
	}
	return nil
}

// next ends the current header and waits for an n-byte one for step.
func (s *rfbStream) next(n int, step func(h []byte) error) error {
	s.hdr = s.hdr[:0]
	return s.more(n, step)
}

// emit passes b (the header as it came, or rewritten).
func (s *rfbStream) emit(b []byte) { s.out = append(s.out, b...) }

// skip queues n payload bytes to pass or drop.
func (s *rfbStream) skip(n int64, drop bool) {
	if n > 0 {
		s.spans = append(s.spans, rfbSpan{n, drop})
	}
}

// pass emits the header as it came and moves on to the next one.
func (s *rfbStream) pass(h []byte, n int, step func(h []byte) error) error {
	s.emit(h)
	return s.next(n, step)
}
