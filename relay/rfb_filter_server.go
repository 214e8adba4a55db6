package relay

import "encoding/binary"

// The desktop-to-client half of the RFB clipboard filter.

// RFB server message types.
const (
	rfbFramebufferUpdate = 0
	rfbSetColourMap      = 1
	rfbBell              = 2
	rfbServerCutText     = 3
)

func (f *rfbFilter) serverVersion(h []byte) error {
	if _, ok := rfbMinor(h); !ok {
		return errRFB("the server's version %q", h)
	}
	return f.down.stream.pass(h, 1, f.serverSecurityTypes)
}

// serverSecurityTypes follows the list of security types (RFB 3.7 and 3.8;
// the client refused 3.3 already, having answered the version first).
func (f *rfbFilter) serverSecurityTypes(h []byte) error {
	s := &f.down.stream
	if h[0] == 0 { // refused, with a reason; the server then hangs up
		return s.more(5, func(h []byte) error {
			s.emit(h)
			s.skip(int64(binary.BigEndian.Uint32(h[1:5])), false)
			s.opaque = true
			return nil
		})
	}
	return s.more(1+int(h[0]), func(h []byte) error {
		if h[0] == 1 {
			// One type: the client can only choose it, and the server may
			// go on before it has (the portal's screen hub does).
			f.mu.Lock()
			f.offered = h[1]
			f.mu.Unlock()
		}
		return s.pass(h, 1, f.serverAfterTypes)
	})
}

// serverAfterTypes reads the first byte after the list: what it starts
// depends on the security type the client chose (which it sent before the
// server could answer, unless only one was offered) and the version.
func (f *rfbFilter) serverAfterTypes(h []byte) error {
	s := &f.down.stream
	f.mu.Lock()
	security, minor := f.security, f.minor
	if security == 0 {
		security = f.offered
	}
	f.mu.Unlock()
	switch {
	case security == 2: // the challenge, then the result
		return s.more(16, func(h []byte) error { return s.pass(h, 4, f.serverResult) })
	case security == 1 && minor >= 8:
		return s.more(4, f.serverResult)
	case security == 1:
		return s.more(24, f.serverInit)
	}
	return errRFB("security type %d", security)
}

// serverResult follows SecurityResult: on failure the reason (3.8) and the
// end of the connection.
func (f *rfbFilter) serverResult(h []byte) error {
	s := &f.down.stream
	if binary.BigEndian.Uint32(h) == 0 {
		return s.pass(h, 24, f.serverInit)
	}
	s.emit(h)
	s.opaque = true // the server hangs up after the reason
	return nil
}

// serverInit follows ServerInit: size, pixel format, name.
func (f *rfbFilter) serverInit(h []byte) error {
	s := &f.down.stream
	pf, err := pixelFormat(h[4:20])
	if err != nil {
		return err
	}
	f.mu.Lock()
	if !f.pf.valid { // a SetPixelFormat may have come first
		f.pf = pf
	}
	f.mu.Unlock()
	s.emit(h)
	s.skip(int64(binary.BigEndian.Uint32(h[20:24])), false)
	return f.toServerMessage()
}

// toServerMessage waits for the next server message: a boundary, where
// the filter may add a message of its own (see notifyLatest).
func (f *rfbFilter) toServerMessage() error {
	f.down.stream.boundary = true
	return f.down.stream.next(1, f.serverMessage)
}

// serverMessage follows one server message from its type byte.
func (f *rfbFilter) serverMessage(h []byte) error {
	s := &f.down.stream
	switch h[0] {
	case rfbFramebufferUpdate:
		return s.more(4, func(h []byte) error {
			f.rects = int(binary.BigEndian.Uint16(h[2:4]))
			if f.rects == 0 {
				s.emit(h)
				return f.toServerMessage()
			}
			return s.pass(h, 12, f.rect)
		})
	case rfbSetColourMap:
		return s.more(6, func(h []byte) error {
			s.emit(h)
			s.skip(6*int64(binary.BigEndian.Uint16(h[4:6])), false)
			return f.toServerMessage()
		})
	case rfbBell, rfbEnableContinuousUpdates: // EndOfContinuousUpdates
		s.emit(h)
		return f.toServerMessage()
	case rfbServerCutText:
		return s.more(8, f.cutTextHeader(&f.down, f.toServerMessage))
	case rfbFence:
		return s.more(9, func(h []byte) error {
			s.emit(h)
			s.skip(int64(h[8]), false)
			return f.toServerMessage()
		})
	case rfbXvp:
		return s.more(4, func(h []byte) error { s.emit(h); return f.toServerMessage() })
	}
	return errRFB("server message type %d", h[0])
}

// rectDone moves on after a rectangle: the next one, or the next message.
func (f *rfbFilter) rectDone() error {
	f.rects--
	if f.rects <= 0 {
		return f.toServerMessage()
	}
	return f.down.stream.next(12, f.rect)
}

// rect follows a rectangle of a FramebufferUpdate from its header.
func (f *rfbFilter) rect(h []byte) error {
	s := &f.down.stream
	w, hh := int64(binary.BigEndian.Uint16(h[4:6])), int64(binary.BigEndian.Uint16(h[6:8]))
	enc := int32(binary.BigEndian.Uint32(h[8:12]))
	f.mu.Lock()
	pf := f.pf
	f.mu.Unlock()
	f.rectW, f.rectH = w, hh
	s.emit(h)
	body := func(n int64) error {
		s.skip(n, false)
		return f.rectDone()
	}
	lengthThen := func(h []byte) error { // a 4-byte length, then that much
		s.emit(h)
		s.skip(int64(binary.BigEndian.Uint32(h)), false)
		return f.rectDone()
	}
	switch enc {
	case 0: // Raw
		return body(w * hh * int64(pf.bpp))
	case 1: // CopyRect
		return body(4)
	case 7: // Tight
		return s.next(1, f.tight)
	case 16: // ZRLE
		return s.next(4, lengthThen)
	case 50: // Open H.264: a 4-byte length, 4 bytes of flags, then that much
		return s.next(8, func(h []byte) error {
			s.emit(h)
			s.skip(int64(binary.BigEndian.Uint32(h)), false)
			return f.rectDone()
		})
	case -239: // Cursor: pixels and a bit mask
		return body(w*hh*int64(pf.bpp) + (w+7)/8*hh)
	case -223, -258: // DesktopSize, QEMU Extended Key Event: no data
		return body(0)
	case -224: // LastRect ends the update
		f.rects = 0
		return f.toServerMessage()
	case -261: // QEMU LED state
		return body(1)
	case -307: // DesktopName
		return s.next(4, lengthThen)
	case -308: // ExtendedDesktopSize: screens of 16 bytes
		return s.next(4, func(h []byte) error {
			s.emit(h)
			return body(16 * int64(h[0]))
		})
	}
	return errRFB("encoding %d, which the client was not let ask for", enc)
}
