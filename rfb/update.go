package rfb

import (
	"encoding/binary"
	"slices"
)

// update is one FramebufferUpdate taken from the framebuffer, to encode
// outside the hub's lock.
type update struct {
	w, h    int
	resize  *resizeNote
	screens []byte
	rects   []Rect
	pix     [][]byte // each rectangle's pixels
	raw     int      // their bytes in all
	cursor  *cursorShape
	pf      PixelFormat
	enc     clientEncodings
	// video is the H.264 access units to send first, for a vw×vh screen,
	// with their Open H.264 flags.
	video      []byte
	vw, vh     int
	videoFlags uint32
}

// take returns what is queued for the client and, when it has asked and
// something changed, an update. A size change goes at once, whether asked
// for or not, as an update of its own (as TigerVNC sends it): noVNC waits
// for the answer to its SetDesktopSize before it asks for more, and the
// client's next request then fetches the pixels. The layout for a client
// that newly follows size changes goes in front of the pixels it asks for.
func (c *client) take() ([][]byte, *update, error) {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	msgs := c.out
	c.out, c.queued = nil, 0
	c.repaintDue()
	u := &update{w: h.fb.w, h: h.fb.h, screens: h.screens, pf: c.pf, enc: c.enc}
	if r := c.resize; r != nil {
		follows := c.enc.eds || c.enc.desktopSize
		switch {
		case follows && (!r.layout || c.requested):
			c.resize = nil
			u.resize = r
			c.w, c.h = h.fb.w, h.fb.h
			if !r.layout { // a change: at once, as an update of its own
				c.requested = false
				return msgs, u, nil
			}
			// The layout goes in front of the pixels asked for, in one
			// update (a client's first: no round trip between them).
		case follows:
			// The layout for a client that newly follows it, not a
			// change: it goes with the client's next request (a second
			// SetEncodings may yet say it does not follow after all).
			return msgs, nil, nil
		case c.w == h.fb.w && c.h == h.fb.h:
			c.resize = nil // the size it knows: nothing to tell
		case !c.requested:
			// Its SetEncodings may still be on the way (a client that has
			// just shaken hands): the change waits for its next request.
			return msgs, nil, nil
		default:
			return nil, nil, protocolErr("the desktop changed size and the client does not follow size changes")
		}
	}
	cursorDue := c.enc.cursor && h.cursor != nil && c.cursorSent != h.cursorGen
	if !c.requested || (len(c.damage) == 0 && len(c.video) == 0 && !cursorDue && u.resize == nil) {
		return msgs, nil, nil
	}
	if len(c.video) > 0 {
		u.video, u.vw, u.vh = c.video, c.videoW, c.videoH
		if c.videoReset {
			u.videoFlags = h264ResetContext
		}
		c.video, c.videoReset = nil, false
		h.videoTaken()
	}
	if cursorDue {
		u.cursor, c.cursorSent = h.cursor, h.cursorGen
	}
	n := 0
	for _, r := range c.damage {
		if r = r.clip(h.fb.w, h.fb.h); !r.empty() {
			u.rects = append(u.rects, r)
			n += r.W * r.H * 4
		}
	}
	// One buffer of the update's size: appended to from empty, a full
	// screen's 4 MiB took twenty allocations and copies, tens of
	// milliseconds of a first screen under load.
	buf := scratch(c.pix, n)
	c.pix = keep(buf)
	u.raw = n
	n = 0
	for _, r := range u.rects {
		m := r.W * r.H * 4
		u.pix = append(u.pix, h.fb.get(r, buf[n:n:n+m]))
		n += m
	}
	c.damage = c.damage[:0]
	c.requested = false
	return msgs, u, nil
}

// encode returns u as the client's FramebufferUpdate message.
func (u *update) encode(c *client) []byte {
	w := &updateWriter{b: append(c.msg[:0], msgFramebufferUpdate, 0, 0, 0)} // the count is set at the end
	if !u.enc.zrle && !u.enc.tight {                                        // Raw: the size is known
		w.b = slices.Grow(w.b, u.raw+12*(len(u.rects)+2)+len(u.screens))
	}
	if r := u.resize; r != nil {
		if u.enc.eds {
			for ; r != nil; r = r.then {
				w.rect(r.reason, r.status, u.w, u.h, encExtendedDesktopSize)
				w.b = append(w.b, u.screens...)
			}
		} else {
			w.rect(0, 0, u.w, u.h, encDesktopSize)
		}
	}
	if u.cursor != nil {
		w.n++
		w.b = appendCursor(w.b, u.cursor, u.pf)
	}
	if u.video != nil {
		w.h264Rect(u.vw, u.vh, u.videoFlags, u.video)
	}
	// Tight for a client that prefers it, unless its rectangles could
	// overflow the count and it cannot end an update with LastRect.
	tight := u.enc.tightFirst && u.pf.Depth == 24
	most := w.n
	for _, r := range u.rects {
		most += tightRects(r)
	}
	lastRect := tight && most >= maxUpdateRects
	if lastRect && !u.enc.lastRect {
		tight, lastRect = false, false
	}
	var conv func(dst, c []byte) []byte
	jpegOK := u.enc.tight && u.enc.jpeg > 0 && u.pf.BitsPerPixel == 32 && (tight || u.enc.zrle)
	for i, r := range u.rects {
		if jpegOK || tight {
			parts := []part{{Rect: Rect{0, 0, r.W, r.H}}}
			if jpegOK {
				parts = split(u.pix[i], r)
			}
			for _, p := range parts {
				pix := subPixels(u.pix[i], r.W, p.Rect)
				if p.jpeg {
					if data, ok := jpegRect(pix, p.W, p.H, u.enc.jpeg-1); ok {
						w.rect(r.X+p.X, r.Y+p.Y, p.W, p.H, encTight)
						w.b = append(w.b, data...)
						continue
					}
				}
				if tight {
					c.tight.encode(w, pix, Rect{r.X + p.X, r.Y + p.Y, p.W, p.H})
					continue
				}
				w.rect(r.X+p.X, r.Y+p.Y, p.W, p.H, encZRLE)
				w.b = append(w.b, c.zrle.encode(pix, Rect{0, 0, p.W, p.H}, u.pf)...)
			}
			continue
		}
		if u.enc.zrle {
			w.rect(r.X, r.Y, r.W, r.H, encZRLE)
			w.b = append(w.b, c.zrle.encode(u.pix[i], Rect{0, 0, r.W, r.H}, u.pf)...)
			continue
		}
		w.rect(r.X, r.Y, r.W, r.H, encRaw)
		if u.pf == canonical {
			w.b = append(w.b, u.pix[i]...)
			continue
		}
		if conv == nil {
			conv = converter(u.pf, false)
		}
		for p := 0; p < len(u.pix[i]); p += 4 {
			w.b = conv(w.b, u.pix[i][p:p+3])
		}
	}
	n := w.n
	if lastRect {
		w.rect(0, 0, 0, 0, encLastRect)
		n = 0xFFFF // as many as come before LastRect
	}
	binary.BigEndian.PutUint16(w.b[2:], uint16(n)) // split keeps the others' count small
	return w.b
}
