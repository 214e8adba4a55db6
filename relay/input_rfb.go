package relay

import "encoding/binary"

// RFB client message types (RFC 6143 and the community extensions noVNC
// uses).
const (
	rfbSetPixelFormat           = 0
	rfbSetEncodings             = 2
	rfbFramebufferUpdateRequest = 3
	rfbKeyEvent                 = 4
	rfbPointerEvent             = 5
	rfbClientCutText            = 6
	rfbEnableContinuousUpdates  = 150
	rfbFence                    = 248
	rfbXvp                      = 250
	rfbSetDesktopSize           = 251
	rfbQEMU                     = 255 // QEMU extended key event and audio
)

// rfbPhase is where an RFB client stream is.
type rfbPhase int

const (
	rfbVersion  rfbPhase = iota // 12-byte "RFB 003.00x\n"
	rfbSecurity                 // one byte: the chosen security type
	rfbVNCAuth                  // 16-byte VNC authentication response
	rfbInit                     // one byte: ClientInit's shared flag
	rfbMessages                 // client messages
	rfbOpaque                   // a security type we cannot follow
)

// RFBInput finds KeyEvent, PointerEvent and QEMU extended key events in an
// RFB 3.7/3.8 client stream (security types None and VNC authentication).
// After a security type it cannot follow (e.g. TLS), it reports every
// chunk as input rather than let an active user be reclaimed as idle.
type RFBInput struct {
	phase rfbPhase
	buf   []byte // the start of a message not complete yet
	skip  int    // payload bytes still to skip (cut text, fence data)
}

// Feed implements InputDetector.
func (d *RFBInput) Feed(p []byte) bool {
	input := false
	for len(p) > 0 {
		if d.phase == rfbOpaque {
			return true
		}
		if d.skip > 0 {
			n := min(d.skip, len(p))
			d.skip -= n
			p = p[n:]
			continue
		}
		d.buf = append(d.buf, p[0])
		p = p[1:]
		need, isInput := d.need()
		if need > len(d.buf) {
			// Copy the rest of what we can in one go.
			n := min(need-len(d.buf), len(p))
			d.buf = append(d.buf, p[:n]...)
			p = p[n:]
			if need, isInput = d.need(); need > len(d.buf) {
				continue
			}
		}
		input = input || isInput
		d.advance()
	}
	return input
}

// need returns how many bytes the message at d.buf takes in all (it may
// grow as its header arrives) and whether it is user input.
func (d *RFBInput) need() (int, bool) {
	b := d.buf
	switch d.phase {
	case rfbVersion:
		return 12, false
	case rfbSecurity, rfbInit:
		return 1, false
	case rfbVNCAuth:
		return 16, false
	}
	switch b[0] {
	case rfbKeyEvent:
		return 8, true
	case rfbPointerEvent:
		return 6, true
	case rfbFramebufferUpdateRequest, rfbEnableContinuousUpdates:
		return 10, false
	case rfbSetPixelFormat:
		return 20, false
	case rfbXvp:
		return 4, false
	case rfbSetEncodings:
		if len(b) < 4 {
			return 4, false
		}
		return 4 + 4*int(binary.BigEndian.Uint16(b[2:4])), false
	case rfbSetDesktopSize:
		if len(b) < 8 {
			return 8, false
		}
		return 8 + 16*int(b[6]), false
	case rfbClientCutText:
		return 8, false // header only; the text is skipped
	case rfbFence:
		return 9, false // header only; the payload is skipped
	case rfbQEMU:
		if len(b) < 2 {
			return 2, false
		}
		if b[1] == 0 { // extended key event
			return 12, true
		}
		return 4, false // audio enable/disable
	}
	return 1, false
}

// advance acts on the complete message in d.buf and resets it.
func (d *RFBInput) advance() {
	b := d.buf
	d.buf = d.buf[:0]
	switch d.phase {
	case rfbVersion:
		d.phase = rfbSecurity
		if string(b[:11]) == "RFB 003.003" {
			d.phase = rfbOpaque // 3.3 has the server pick the type; rare
		}
	case rfbSecurity:
		switch b[0] {
		case 1: // None
			d.phase = rfbInit
		case 2: // VNC authentication
			d.phase = rfbVNCAuth
		default:
			d.phase = rfbOpaque
		}
	case rfbVNCAuth:
		d.phase = rfbInit
	case rfbInit:
		d.phase = rfbMessages
	case rfbMessages:
		switch b[0] {
		case rfbClientCutText:
			// A negative length announces the extended clipboard format,
			// whose payload is the absolute value long.
			n := int64(int32(binary.BigEndian.Uint32(b[4:8])))
			d.skip = int(max(n, -n))
		case rfbFence:
			d.skip = int(b[8])
		case rfbSetPixelFormat, rfbSetEncodings, rfbFramebufferUpdateRequest, rfbKeyEvent, rfbPointerEvent,
			rfbEnableContinuousUpdates, rfbXvp, rfbSetDesktopSize, rfbQEMU:
		default:
			d.phase = rfbOpaque // an unknown message: its length is unknown
		}
	}
}
