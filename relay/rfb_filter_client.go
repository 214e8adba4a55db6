package relay

import "encoding/binary"

// The client-to-desktop half of the RFB clipboard filter.

// followedEncodings are the encodings the filter can follow in framebuffer
// updates, and the pseudo-encodings whose effects it knows; the client's
// SetEncodings is cut down to these.
var followedEncodings = map[int32]bool{
	0:                 true, // Raw
	1:                 true, // CopyRect
	7:                 true, // Tight
	16:                true, // ZRLE
	50:                true, // Open H.264
	-223:              true, // DesktopSize
	-224:              true, // LastRect
	-239:              true, // Cursor
	-258:              true, // QEMU Extended Key Event
	-261:              true, // QEMU LED state
	-307:              true, // DesktopName
	-308:              true, // ExtendedDesktopSize
	-309:              true, // xvp
	-312:              true, // Fence
	-313:              true, // ContinuousUpdates
	extendedClipboard: true,
}

// followed reports whether the filter can follow encoding e: one of
// followedEncodings, or a Tight quality or compression level.
func followed(e int32) bool {
	return followedEncodings[e] || (e >= -32 && e <= -23) || (e >= -256 && e <= -247)
}

func (f *rfbFilter) clientVersion(h []byte) error {
	s := &f.up.stream
	minor, ok := rfbMinor(h)
	if !ok || minor < 7 {
		return errRFB("the client's version %q", h)
	}
	f.mu.Lock()
	f.minor = minor
	f.mu.Unlock()
	return s.pass(h, 1, f.clientSecurity)
}

// rfbMinor returns the minor version of a ProtocolVersion message, 8 for
// anything newer (as servers treat it).
func rfbMinor(h []byte) (int, bool) {
	if string(h[:8]) != "RFB 003." || h[11] != '\n' {
		return 0, false
	}
	minor := 0
	for _, c := range h[8:11] {
		if c < '0' || c > '9' {
			return 0, false
		}
		minor = minor*10 + int(c-'0')
	}
	return min(minor, 8), true
}

func (f *rfbFilter) clientSecurity(h []byte) error {
	s := &f.up.stream
	f.mu.Lock()
	f.security = h[0]
	f.mu.Unlock()
	switch h[0] {
	case 1: // None
		return s.pass(h, 1, f.clientInit)
	case 2: // VNC authentication: the 16-byte response
		return s.pass(h, 16, func(h []byte) error { return s.pass(h, 1, f.clientInit) })
	}
	return errRFB("security type %d", h[0])
}

func (f *rfbFilter) clientInit(h []byte) error {
	return f.up.stream.pass(h, 1, f.clientMessage)
}

// clientMessage follows one client message from its type byte.
func (f *rfbFilter) clientMessage(h []byte) error {
	s := &f.up.stream
	fixed := func(n int) error {
		return s.more(n, func(h []byte) error { return s.pass(h, 1, f.clientMessage) })
	}
	switch h[0] {
	case rfbSetPixelFormat:
		return s.more(20, func(h []byte) error {
			pf, err := pixelFormat(h[4:20])
			if err != nil {
				return err
			}
			f.mu.Lock()
			f.pf = pf
			f.mu.Unlock()
			return s.pass(h, 1, f.clientMessage)
		})
	case rfbSetEncodings:
		return s.more(4, func(h []byte) error {
			return s.more(4+4*int(binary.BigEndian.Uint16(h[2:4])), f.clientEncodings)
		})
	case rfbFramebufferUpdateRequest, rfbEnableContinuousUpdates:
		return fixed(10)
	case rfbKeyEvent:
		return fixed(8)
	case rfbPointerEvent:
		return fixed(6)
	case rfbXvp:
		return fixed(4)
	case rfbClientCutText:
		return s.more(8, f.cutTextHeader(&f.up, func() error { return s.next(1, f.clientMessage) }))
	case rfbFence:
		return s.more(9, func(h []byte) error {
			return s.more(9+int(h[8]), func(h []byte) error { return s.pass(h, 1, f.clientMessage) })
		})
	case rfbSetDesktopSize:
		return s.more(8, func(h []byte) error { return fixed(8 + 16*int(h[6])) })
	case rfbQEMU:
		return s.more(2, func(h []byte) error {
			if h[1] == 0 { // extended key event
				return fixed(12)
			}
			return errRFB("QEMU client message %d", h[1])
		})
	}
	return errRFB("client message type %d", h[0])
}

// clientEncodings passes a SetEncodings cut down to followed encodings.
func (f *rfbFilter) clientEncodings(h []byte) error {
	s := &f.up.stream
	out := append([]byte(nil), h[:4]...)
	for i := 4; i+4 <= len(h); i += 4 {
		if followed(int32(binary.BigEndian.Uint32(h[i:]))) {
			out = append(out, h[i:i+4]...)
		}
	}
	binary.BigEndian.PutUint16(out[2:4], uint16((len(out)-4)/4))
	s.emit(out)
	return s.next(1, f.clientMessage)
}

// pixelFormat reads the 16-byte PIXEL_FORMAT structure.
func pixelFormat(b []byte) (rfbPixel, error) {
	bits, depth, trueColour := b[0], b[1], b[3] != 0
	if bits != 8 && bits != 16 && bits != 32 {
		return rfbPixel{}, errRFB("%d bits per pixel", bits)
	}
	pf := rfbPixel{bpp: int(bits) / 8, valid: true}
	pf.tight = pf.bpp
	maxes := [3]uint16{binary.BigEndian.Uint16(b[4:]), binary.BigEndian.Uint16(b[6:]), binary.BigEndian.Uint16(b[8:])}
	if bits == 32 && depth == 24 && trueColour && maxes == [3]uint16{255, 255, 255} {
		pf.tight = 3 // Tight sends such pixels as three bytes
	}
	return pf, nil
}
