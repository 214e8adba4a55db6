package rfb

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"
)

// handshakeTimeout bounds the RFB handshake with the desktop.
const handshakeTimeout = 15 * time.Second

// maxName bounds the desktop's name.
const maxName = 4096

// handshake is the hub's client side of the RFB handshake: the highest
// version both speak up to 3.8, security None (the portal reaches a
// desktop's console on a path only it can open; a desktop that asks for a
// VNC password is not one the portal serves), a shared session, then the
// hub's pixel format and encodings and a first full update request.
func (h *Hub) handshake() error {
	c := h.conn
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	defer c.SetDeadline(time.Time{})
	v := make([]byte, 12)
	if err := readFull(c, v); err != nil {
		return fmt.Errorf("rfb: read the desktop's version: %w", err)
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(v), "RFB %03d.%03d\n", &major, &minor); err != nil || major != 3 {
		return protocolErr("the desktop's version %q", v)
	}
	minor = min(minor, 8)
	if minor < 7 {
		minor = 3
	}
	if _, err := fmt.Fprintf(c, "RFB 003.%03d\n", minor); err != nil {
		return err
	}
	if minor == 3 {
		var t [4]byte
		if err := readFull(c, t[:]); err != nil {
			return err
		}
		if st := binary.BigEndian.Uint32(t[:]); st != 1 {
			return h.refused(st)
		}
	} else {
		var n [1]byte
		if err := readFull(c, n[:]); err != nil {
			return err
		}
		if n[0] == 0 {
			return h.refused(0)
		}
		types := make([]byte, n[0])
		if err := readFull(c, types); err != nil {
			return err
		}
		if !containsByte(types, 1) {
			return protocolErr("the desktop asks for security types %v, not None", types)
		}
		if _, err := c.Write([]byte{1}); err != nil {
			return err
		}
		if minor == 8 {
			var r [4]byte
			if err := readFull(c, r[:]); err != nil {
				return err
			}
			if binary.BigEndian.Uint32(r[:]) != 0 {
				return h.refused(0)
			}
		}
	}
	if _, err := c.Write([]byte{1}); err != nil { // ClientInit: shared
		return err
	}
	si := make([]byte, 24)
	if err := readFull(c, si); err != nil {
		return fmt.Errorf("rfb: read the desktop's ServerInit: %w", err)
	}
	w, hh := int(binary.BigEndian.Uint16(si[0:])), int(binary.BigEndian.Uint16(si[2:]))
	if w > maxDimension || hh > maxDimension {
		return protocolErr("a %d×%d desktop", w, hh)
	}
	nameLen := binary.BigEndian.Uint32(si[20:])
	if nameLen > maxName {
		return protocolErr("a desktop name of %d bytes", nameLen)
	}
	name := make([]byte, nameLen)
	if err := readFull(c, name); err != nil {
		return err
	}
	h.name = string(name)
	h.qemu = isQEMU(h.name)
	h.fb.resize(w, hh)
	h.screens = oneScreen(w, hh)

	msg := append([]byte{msgSetPixelFormat, 0, 0, 0}, canonical.marshal()...)
	encs := upstreamEncodings(h.conn.LocalAddr().Network() == "unix")
	msg = append(msg, msgSetEncodings, 0, 0, byte(len(encs)))
	for _, e := range encs {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	msg = append(msg, updateRequest(false, w, hh)...)
	_, err := c.Write(msg)
	return err
}

// upstreamEncodings are the encodings the hub asks a desktop for. A
// desktop across a network sends ZRLE. One on this machine (a Unix
// socket: a local Xvnc or QEMU) is not asked for ZRLE, so it sends Raw:
// ZRLE's deflate in the desktop server and inflate in the hub cost more
// CPU than a copy through the socket (in make bench-wan's full-screen
// churn on the LAN, the portal 10.5-12 % of a core at 28 fps against
// 27.8-29.5 % with ZRLE, Xvnc 58-61 % against 66-67 %; docs/performance.md).
// TigerVNC fills every kind of rectangle with ZRLE whenever a client
// lists it, so not listing it is the way to ask for Raw.
func upstreamEncodings(local bool) []int32 {
	encs := []int32{encZRLE, encCopyRect, encRaw, encExtendedDesktopSize, encDesktopSize, encLastRect, encExtendedClipboard, encCursor, encQEMUKeyEvent}
	if local {
		return encs[1:]
	}
	return encs
}

// refused reads the reason a desktop gives for refusing the connection.
func (h *Hub) refused(security uint32) error {
	var n [4]byte
	if err := readFull(h.conn, n[:]); err != nil {
		return protocolErr("the desktop refused the connection (security type %d)", security)
	}
	reason := make([]byte, min(binary.BigEndian.Uint32(n[:]), 1024))
	readFull(h.conn, reason)
	return protocolErr("the desktop refused the connection: %q", reason)
}

func containsByte(b []byte, c byte) bool {
	for _, x := range b {
		if x == c {
			return true
		}
	}
	return false
}

// updateRequest is a FramebufferUpdateRequest for the whole w×h screen.
func updateRequest(incremental bool, w, h int) []byte {
	b := []byte{msgUpdateRequest, 0, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h)}
	if incremental {
		b[1] = 1
	}
	return b
}

// oneScreen is an ExtendedDesktopSize screen list of one w×h screen, for a
// desktop that only says DesktopSize.
func oneScreen(w, h int) []byte {
	b := make([]byte, 4+16)
	b[0] = 1
	binary.BigEndian.PutUint16(b[12:], uint16(w))
	binary.BigEndian.PutUint16(b[14:], uint16(h))
	return b
}

// read follows the desktop's messages until the connection ends, keeping
// the framebuffer and telling the clients.
func (h *Hub) read() error {
	c := h.conn
	var t [1]byte
	for {
		if err := readFull(c, t[:]); err != nil {
			return err
		}
		var err error
		switch t[0] {
		case msgFramebufferUpdate:
			err = h.readUpdate()
		case msgBell:
			h.broadcast([]byte{msgBell}, false, false)
		case msgServerCutText:
			err = h.readCutText()
		default:
			err = protocolErr("server message type %d", t[0])
		}
		if err != nil {
			return err
		}
	}
}

// readCutText passes a ServerCutText to the clients that hold control (the
// desktop's clipboard is the holder's); the Extended Clipboard's caps are
// kept to be told to each client that joins.
func (h *Hub) readCutText() error {
	hdr := make([]byte, 8)
	hdr[0] = msgServerCutText
	if err := readFull(h.conn, hdr[1:]); err != nil {
		return err
	}
	n := int32(binary.BigEndian.Uint32(hdr[4:]))
	size := int64(n)
	extended := n < 0
	if extended {
		size = -int64(n)
	}
	if size > maxCutText {
		return discard(h.conn, size)
	}
	msg := make([]byte, 8+size)
	copy(msg, hdr)
	if err := readFull(h.conn, msg[8:]); err != nil {
		return err
	}
	if extended && size >= 4 && msg[8]&0x01 != 0 { // caps
		h.mu.Lock()
		h.clipCaps = msg
		h.mu.Unlock()
	}
	h.broadcast(msg, true, extended)
	return nil
}

// readUpdate follows one FramebufferUpdate into the framebuffer, then
// marks it on every client and asks the desktop for the next.
func (h *Hub) readUpdate() error {
	c := h.conn
	hdr := make([]byte, 3)
	if err := readFull(c, hdr); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint16(hdr[1:]))
	var damage Rect
	pixels := false // a rectangle of the screen's pixels, not only news of it
	rh := make([]byte, 12)
	for range n {
		if err := readFull(c, rh); err != nil {
			return err
		}
		r := Rect{int(binary.BigEndian.Uint16(rh[0:])), int(binary.BigEndian.Uint16(rh[2:])), int(binary.BigEndian.Uint16(rh[4:])), int(binary.BigEndian.Uint16(rh[6:]))}
		enc := int32(binary.BigEndian.Uint32(rh[8:]))
		if enc == encLastRect {
			break
		}
		d, err := h.readRect(r, enc)
		if err != nil {
			return err
		}
		damage = damage.union(d)
		switch enc {
		case encCursor, encQEMUKeyEvent:
		case encDesktopSize, encExtendedDesktopSize:
			if !d.empty() { // a new screen, black until painted
				h.painted = Rect{}
			}
		default:
			pixels = true
			h.painted = h.painted.union(d)
		}
	}
	h.mu.Lock()
	w, hh := h.fb.w, h.fb.h
	h.mu.Unlock()
	if !damage.empty() {
		h.damage(damage)
	}
	// The first screen is the one whose pixels all came: a desktop may
	// send its pointer's shape or its size in updates of their own first
	// (Xvnc did, as the kube tests' VM display), which left the first
	// clients a black picture.
	if !h.gotFirst && h.painted.covers(Rect{0, 0, w, hh}) {
		h.gotFirst = true
		close(h.first)
	}
	if n > 0 && !pixels && h.qemu {
		return nil // QEMU's news, sent unasked: the request out stays out
	}
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_, err := c.Write(updateRequest(true, w, hh))
	return err
}

// isQEMU reports whether a desktop's name is that of QEMU's VNC server
// ("QEMU", or "QEMU (<its -name>)": ui/vnc.c), which sends some updates
// unasked, each without pixels: the answer to a SetDesktopSize it passes
// to the guest (at once), the screen's new size, the pointer's shape, the
// Extended Key Event's acknowledgement. The hub's request stays out
// after them, so the hub asks nothing more. A request sent while QEMU
// encodes the last one's pixels is lost with them when the guest's screen
// changes size meanwhile: QEMU gives the dropped update back only to a
// client with no request out (vnc_abort_display_jobs) and never sends
// that connection pixels again. Asking after each answer made that race:
// the split on a real QEMU showed both windows black for minutes
// (TestKube_SplitOnQEMU), and a client resizing QEMU 7.2's display every
// few hundred milliseconds got no pixels after about 60 resizes (none
// lost in 580 without asking after the news). Other desktops (Xvnc) send
// such news in answer to a request, and are asked again after it.
func isQEMU(name string) bool {
	return name == "QEMU" || strings.HasPrefix(name, "QEMU (")
}

// readRect reads one rectangle and returns what of the screen it changed.
func (h *Hub) readRect(r Rect, enc int32) (Rect, error) {
	c := h.conn
	switch enc {
	case encDesktopSize:
		return h.resized(r.W, r.H, 0, 0, oneScreen(r.W, r.H))
	case encExtendedDesktopSize:
		var n [4]byte
		if err := readFull(c, n[:]); err != nil {
			return Rect{}, err
		}
		screens := make([]byte, 4+16*int(n[0]))
		copy(screens, n[:])
		if err := readFull(c, screens[4:]); err != nil {
			return Rect{}, err
		}
		return h.resized(r.W, r.H, r.X, r.Y, screens)
	case encCursor:
		return Rect{}, h.readCursor(r)
	case encQEMUKeyEvent: // no data; QEMU names its screen's size
		h.offerQEMUKeys()
		return Rect{}, nil
	}
	h.mu.Lock()
	w, hh := h.fb.w, h.fb.h
	h.mu.Unlock()
	if !r.inside(w, hh) {
		return Rect{}, protocolErr("a rectangle %+v outside the %d×%d screen", r, w, hh)
	}
	switch enc {
	case encRaw:
		h.scratch = scratch(h.scratch, r.W*r.H*4)
		if err := readFull(c, h.scratch); err != nil {
			return Rect{}, err
		}
		for i := 3; i < len(h.scratch); i += 4 {
			h.scratch[i] = 0
		}
	case encZRLE:
		h.scratch = scratch(h.scratch, r.W*r.H*4)
		if err := h.zrle.decode(c, r, h.scratch); err != nil {
			return Rect{}, err
		}
	case encCopyRect:
		var src [4]byte
		if err := readFull(c, src[:]); err != nil {
			return Rect{}, err
		}
		sx, sy := int(binary.BigEndian.Uint16(src[0:])), int(binary.BigEndian.Uint16(src[2:]))
		if !(Rect{sx, sy, r.W, r.H}).inside(w, hh) {
			return Rect{}, protocolErr("a CopyRect from outside the screen")
		}
		h.mu.Lock()
		h.fb.copyRect(r, sx, sy)
		h.mu.Unlock()
		return r, nil
	default:
		return Rect{}, protocolErr("encoding %d, which the portal did not ask for", enc)
	}
	h.mu.Lock()
	h.fb.put(r, h.scratch)
	h.mu.Unlock()
	// A full screen's rectangle (at connect, a new window) is not kept
	// for the small ones that follow: 4 MiB a desktop, held for nothing.
	h.scratch = keep(h.scratch)
	return r, nil
}

// resized applies a size change (or, from ExtendedDesktopSize, the answer
// to a client's SetDesktopSize: reason 1, status non-zero when refused).
func (h *Hub) resized(w, hh, reason, status int, screens []byte) (Rect, error) {
	if w > maxDimension || hh > maxDimension || w == 0 || hh == 0 {
		if status != 0 { // a refusal names the old size, or none
			h.tellResize(reason, status, false)
			return Rect{}, nil
		}
		return Rect{}, protocolErr("a %d×%d desktop", w, hh)
	}
	h.mu.Lock()
	changed := w != h.fb.w || hh != h.fb.h
	if changed {
		h.fb.resize(w, hh)
	}
	h.screens = screens
	h.mu.Unlock()
	h.tellResize(reason, status, changed)
	if changed {
		return Rect{0, 0, w, hh}, nil
	}
	return Rect{}, nil
}
