package rfb

import "encoding/binary"

// The Cursor pseudo-encoding (-239): the desktop sends its pointer's shape
// and the browser draws it locally, so the pointer follows the user's
// mouse at once instead of a round trip later, and is not drawn into the
// pixels every viewer is sent. The hub keeps the latest shape and sends
// it to each client that follows the encoding.
const encCursor int32 = -239

// maxCursor bounds a cursor's side; desktops' are 32 to 128 pixels.
const maxCursor = 512

// cursorShape is a cursor: its hotspot, size, canonical pixels and the
// bitmask of its opaque pixels (a row of (w+7)/8 bytes each).
type cursorShape struct {
	x, y, w, h int
	pix, mask  []byte
}

// readCursor reads a Cursor rectangle of the desktop's (r's X and Y are
// the hotspot) and tells the clients.
func (h *Hub) readCursor(r Rect) error {
	if r.W > maxCursor || r.H > maxCursor {
		return protocolErr("a %d×%d cursor", r.W, r.H)
	}
	cur := &cursorShape{x: r.X, y: r.Y, w: r.W, h: r.H, pix: make([]byte, r.W*r.H*4), mask: make([]byte, (r.W+7)/8*r.H)}
	if err := readFull(h.conn, cur.pix); err != nil {
		return err
	}
	if err := readFull(h.conn, cur.mask); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cursor = cur
	h.cursorGen++
	for c := range h.clients {
		if c.enc.cursor {
			c.wakeUp()
		}
	}
	return nil
}

// appendCursor appends cur as a Cursor rectangle in pixel format pf.
func appendCursor(b []byte, cur *cursorShape, pf PixelFormat) []byte {
	b = binary.BigEndian.AppendUint16(b, uint16(cur.x))
	b = binary.BigEndian.AppendUint16(b, uint16(cur.y))
	b = binary.BigEndian.AppendUint16(b, uint16(cur.w))
	b = binary.BigEndian.AppendUint16(b, uint16(cur.h))
	enc := encCursor
	b = binary.BigEndian.AppendUint32(b, uint32(enc))
	conv := converter(pf, false)
	for p := 0; p < len(cur.pix); p += 4 {
		b = conv(b, cur.pix[p:p+3])
	}
	return append(b, cur.mask...)
}
