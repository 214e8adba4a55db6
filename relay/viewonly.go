package relay

// RFBViewOnly filters an RFB client stream for a watcher: KeyEvent,
// PointerEvent, ClientCutText (with its text), QEMU extended key events,
// SetDesktopSize (a watcher never resizes the holder's desktop) and xvp
// power requests are dropped, everything else (handshake, pixel format,
// encodings, update requests) passes whole. noVNC's viewOnly flag is the
// browser's promise; this is the portal's, so that a watcher's client
// cannot type into or click on the holder's desktop whatever it sends.
// After something it cannot follow (a security type like TLS, an unknown
// message) it drops the rest of the stream: a stalled view is better
// than input slipping through.
type RFBViewOnly struct {
	d        RFBInput // the RFB stream parser the idle detector uses
	dropSkip bool     // whether the payload being skipped is dropped
}

// Filter returns what of the next chunk of the client stream may reach
// the desktop. Messages split across chunks are held until complete.
func (v *RFBViewOnly) Filter(p []byte) []byte {
	d := &v.d
	out := make([]byte, 0, len(p))
	for len(p) > 0 {
		if d.phase == rfbOpaque {
			return out
		}
		if d.skip > 0 {
			n := min(d.skip, len(p))
			if !v.dropSkip {
				out = append(out, p[:n]...)
			}
			d.skip -= n
			p = p[n:]
			continue
		}
		d.buf = append(d.buf, p[0])
		p = p[1:]
		if need, _ := d.need(); need > len(d.buf) {
			n := min(need-len(d.buf), len(p))
			d.buf = append(d.buf, p[:n]...)
			p = p[n:]
			if need, _ = d.need(); need > len(d.buf) {
				continue
			}
		}
		drop := d.phase == rfbMessages && rfbUserInput(d.buf)
		if !drop {
			out = append(out, d.buf...)
		}
		v.dropSkip = drop
		clientInit := d.phase == rfbInit
		d.advance()
		if clientInit && d.phase == rfbMessages {
			out = append(out, takesResizes...)
		}
	}
	return out
}

// takesResizes is a SetEncodings the portal sends for a watcher right
// after its ClientInit: DesktopSize and ExtendedDesktopSize. TigerVNC
// closes a client that has not yet said it follows size changes when the
// desktop is resized (the holder's window changed), and a watcher's own
// SetEncodings is a browser round trip away; it replaces this one.
var takesResizes = []byte{rfbSetEncodings, 0, 0, 2,
	0xff, 0xff, 0xff, 0x21, // -223 DesktopSize
	0xff, 0xff, 0xfe, 0xcc, // -308 ExtendedDesktopSize
}

// rfbUserInput reports whether the complete client message b is a user's
// input to the desktop or a change to it.
func rfbUserInput(b []byte) bool {
	switch b[0] {
	case rfbKeyEvent, rfbPointerEvent, rfbClientCutText, rfbSetDesktopSize, rfbXvp:
		return true
	case rfbQEMU:
		return len(b) > 1 && b[1] == 0
	}
	return false
}
