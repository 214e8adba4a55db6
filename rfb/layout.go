package rfb

import "encoding/binary"

// What the hub passes on of a client's SetDesktopSize: a layout it could
// show. QEMU's VNC server (a local VM's, KubeVirt's) reads only the
// request's width and height and hands them to the guest without a look
// (ui/vnc.c): 0×0 turns a virtio-gpu output off, and a layout Xvnc would
// refuse goes through. So the hub checks the layout itself, as TigerVNC's
// ScreenSet::validate does, and more strictly: screens side by side, as
// the console's windows are (static/app/vnc-screens.js).

// statusProhibited is ExtendedDesktopSize's answer to a SetDesktopSize
// from a client that may not change the desktop (a viewer without
// control): RFB's "resize is administratively prohibited".
const statusProhibited = 1

// validLayout reports whether the hub may pass on a SetDesktopSize
// message's layout: a framebuffer of 1 to maxDimension pixels a side, one
// screen or more, each of some size, inside the framebuffer (a "negative"
// x, past 32767, lies outside), with an id of its own, and no two
// overlapping.
func validLayout(msg []byte) bool {
	w, h := int(binary.BigEndian.Uint16(msg[2:])), int(binary.BigEndian.Uint16(msg[4:]))
	if w == 0 || h == 0 || w > maxDimension || h > maxDimension || msg[6] == 0 {
		return false
	}
	ids := map[uint32]bool{}
	var screens []Rect
	for s := msg[8:]; len(s) >= 16; s = s[16:] {
		id := binary.BigEndian.Uint32(s)
		r := Rect{int(binary.BigEndian.Uint16(s[4:])), int(binary.BigEndian.Uint16(s[6:])),
			int(binary.BigEndian.Uint16(s[8:])), int(binary.BigEndian.Uint16(s[10:]))}
		if r.empty() || !r.inside(w, h) || ids[id] {
			return false
		}
		for _, o := range screens {
			if o.overlaps(r) {
				return false
			}
		}
		ids[id] = true
		screens = append(screens, r)
	}
	return true
}

// overlaps reports whether r and o share a pixel.
func (r Rect) overlaps(o Rect) bool {
	return r.X < o.X+o.W && o.X < r.X+r.W && r.Y < o.Y+o.H && o.Y < r.Y+r.H
}
