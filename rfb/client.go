package rfb

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"slices"
	"time"
)

// maxQueued bounds what waits for a client other than pixels (bells, cut
// texts): past it a stalled client loses those, never the desktop's pace.
const maxQueued = 4 << 20

// maxUpdateRects is the most rectangles an update's count says; past it
// an update ends with LastRect instead (a variable: the tests lower it).
var maxUpdateRects = 0xFFFF

// maxDamage is how many changed rectangles a client keeps apart before
// they are merged into one.
const maxDamage = 32

// client is one downstream connection the hub serves as an RFB server.
type client struct {
	hub     *Hub
	conn    net.Conn
	control bool
	wake    chan struct{}

	// Guarded by hub.mu.
	pf         PixelFormat
	enc        clientEncodings
	damage     []Rect
	requested  bool
	w, h       int // the screen's size as the client was last told it
	resize     *resizeNote
	cursorSent uint64 // the hub's cursorGen last sent
	repaints   repaintBudget
	out        [][]byte
	queued     int
	// The H.264 stream (h264_hub.go): whether the client is in it, the
	// access units it has not asked for yet, for a w×h screen, and
	// whether its decoder must start again.
	inStream       bool
	video          []byte
	videoW, videoH int
	videoReset     bool
	// sink, if set, takes its access units instead (h264_sink.go).
	sink VideoSink
	// lossy: it was sent video since its screen was last painted
	// losslessly (repaintSettled).
	lossy bool

	// The writer's own.
	zrle  zrleEncoder
	tight tightEncoder
	// pix and msg are kept for the next update when small (keepMax):
	// most updates are (a keypress's echo, a pointer's trail), and a
	// fresh pair each time was most of the portal's garbage under load.
	pix, msg []byte
}

// clientEncodings is what a client's SetEncodings said it follows.
type clientEncodings struct {
	zrle, tight, desktopSize, eds, extClip, cursor, lastRect, h264, qemuKeys bool
	// tightFirst: Tight comes before ZRLE in the client's list (or
	// without it), so the hub sends its lossless rectangles as Tight.
	tightFirst bool
	// jpeg is 1 + the JPEG quality level asked for (0–9); 0: none.
	jpeg int
	// video is the Picture choice, read from the compression level
	// (h264_picture.go).
	video videoMode
}

// resizeNote is a size change (or the answer to a SetDesktopSize) to tell
// a client before its next pixels.
type resizeNote struct {
	reason, status int
	layout         bool // only the layout, for a client that newly follows it
	// then is a change told after this answer, which refused or passed
	// on the request (status non-zero), in the same update
	// (Hub.noteResize).
	then *resizeNote
}

func (c *client) wakeUp() {
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// queue adds a message for the client; hub.mu is held.
func (c *client) queue(msg []byte) {
	if c.queued+len(msg) > maxQueued {
		return
	}
	c.out = append(c.out, msg)
	c.queued += len(msg)
	c.wakeUp()
}

// addDamage notes r changed; hub.mu is held. A rectangle already covered
// adds nothing, and one that covers others replaces them.
func (c *client) addDamage(r Rect) {
	for _, d := range c.damage {
		if d.covers(r) {
			return
		}
	}
	c.damage = slices.DeleteFunc(c.damage, r.covers)
	if len(c.damage) >= maxDamage {
		all := r
		for _, d := range c.damage {
			all = all.union(d)
		}
		c.damage = append(c.damage[:0], all)
	} else {
		c.damage = append(c.damage, r)
	}
	c.wakeUp()
}

// Serve serves conn as one of the hub's clients until conn, ctx or the hub
// ends. Only with control does the client's input (keys, pointer, cut
// text, size requests) reach the desktop; without it the input is read and
// dropped. It closes conn.
func (h *Hub) Serve(ctx context.Context, conn net.Conn, control bool) error {
	defer conn.Close()
	c := &client{hub: h, conn: conn, control: control, wake: make(chan struct{}, 1), pf: canonical}
	if err := c.handshake(); err != nil {
		return err
	}
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return h.err
	}
	h.clients[c] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.clients, c)
		if h.resizer == c {
			h.resizer = nil
		}
		h.mu.Unlock()
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wrote := make(chan error, 1)
	go func() {
		err := c.write(ctx)
		conn.Close()
		wrote <- err
	}()
	go func() {
		select {
		case <-ctx.Done():
		case <-h.done:
		}
		conn.Close()
	}()
	err := c.read()
	cancel()
	conn.Close()
	if werr := <-wrote; werr != nil {
		err = werr
	}
	if herr := h.Err(); herr != nil {
		return herr
	}
	return err
}

// handshake is the server side of the RFB handshake: 3.8 (or 3.7, 3.3),
// security None (the portal has authorized the user before the websocket
// opened), and the hub's screen in ServerInit.
func (c *client) handshake() error {
	conn := c.conn
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write([]byte("RFB 003.008\n")); err != nil {
		return err
	}
	v := make([]byte, 12)
	if err := readFull(conn, v); err != nil {
		return err
	}
	var major, minor int
	if _, err := fmt.Sscanf(string(v), "RFB %03d.%03d\n", &major, &minor); err != nil || major != 3 {
		return protocolErr("the client's version %q", v)
	}
	if minor >= 7 {
		if _, err := conn.Write([]byte{1, 1}); err != nil {
			return err
		}
		var t [1]byte
		if err := readFull(conn, t[:]); err != nil {
			return err
		}
		if t[0] != 1 {
			return protocolErr("the client chose security type %d", t[0])
		}
		if minor >= 8 {
			if _, err := conn.Write([]byte{0, 0, 0, 0}); err != nil {
				return err
			}
		}
	} else if _, err := conn.Write([]byte{0, 0, 0, 1}); err != nil {
		return err
	}
	var shared [1]byte
	if err := readFull(conn, shared[:]); err != nil { // every client shares
		return err
	}
	h := c.hub
	h.mu.Lock()
	si := binary.BigEndian.AppendUint16(nil, uint16(h.fb.w))
	si = binary.BigEndian.AppendUint16(si, uint16(h.fb.h))
	c.w, c.h = h.fb.w, h.fb.h
	h.mu.Unlock()
	si = append(si, canonical.marshal()...)
	si = binary.BigEndian.AppendUint32(si, uint32(len(h.name)))
	si = append(si, h.name...)
	_, err := conn.Write(si)
	return err
}

// read follows the client's messages until its connection ends.
func (c *client) read() error {
	h, conn := c.hub, c.conn
	var t [1]byte
	for {
		if err := readFull(conn, t[:]); err != nil {
			return err
		}
		switch t[0] {
		case msgSetPixelFormat:
			b := make([]byte, 19)
			if err := readFull(conn, b); err != nil {
				return err
			}
			pf, err := parsePixelFormat(b[3:])
			if err != nil {
				return err
			}
			h.mu.Lock()
			if pf != c.pf { // its pixels again, in the new format
				c.askFull(Rect{0, 0, h.fb.w, h.fb.h})
			}
			c.pf = pf
			h.mu.Unlock()
		case msgSetEncodings:
			if err := c.readEncodings(); err != nil {
				return err
			}
		case msgUpdateRequest:
			b := make([]byte, 9)
			if err := readFull(conn, b); err != nil {
				return err
			}
			r := Rect{int(binary.BigEndian.Uint16(b[1:])), int(binary.BigEndian.Uint16(b[3:])), int(binary.BigEndian.Uint16(b[5:])), int(binary.BigEndian.Uint16(b[7:]))}
			h.mu.Lock()
			c.requested = true
			if b[0] == 0 {
				c.askFull(r)
			}
			c.wakeUp()
			h.mu.Unlock()
		case msgKeyEvent, msgPointerEvent:
			n := 8
			if t[0] == msgPointerEvent {
				n = 6
			}
			if err := c.input(t[0], n); err != nil {
				return err
			}
		case msgClientCutText:
			if err := c.readCutText(); err != nil {
				return err
			}
		case msgQEMU:
			if err := c.readQEMU(); err != nil {
				return err
			}
		case msgSetDesktopSize:
			if err := c.readSetDesktopSize(); err != nil {
				return err
			}
		default:
			return protocolErr("client message type %d", t[0])
		}
	}
}

// input reads a fixed-size input message of n bytes and passes it to the
// desktop when the client holds control.
func (c *client) input(typ byte, n int) error {
	b := make([]byte, n)
	b[0] = typ
	if err := readFull(c.conn, b[1:]); err != nil {
		return err
	}
	if !c.control {
		return nil
	}
	return c.hub.send(b)
}

// readEncodings notes which of the hub's encodings the client follows;
// a client that newly follows ExtendedDesktopSize is told the layout (so
// that noVNC offers resizing) and one that follows the Extended Clipboard
// with control is told the desktop's caps; one that asks for QEMU's
// extended key events is told when the desktop takes them.
func (c *client) readEncodings() error {
	b := make([]byte, 3)
	if err := readFull(c.conn, b); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint16(b[1:]))
	list := make([]byte, 4*n)
	if err := readFull(c.conn, list); err != nil {
		return err
	}
	var e clientEncodings
	for i := 0; i < len(list); i += 4 {
		switch int32(binary.BigEndian.Uint32(list[i:])) {
		case encZRLE:
			e.zrle = true
		case encTight:
			e.tight = true
			e.tightFirst = !e.zrle
		case encLastRect:
			e.lastRect = true
		case encCursor:
			e.cursor = true
		case encDesktopSize:
			e.desktopSize = true
		case encExtendedDesktopSize:
			e.eds = true
		case encExtendedClipboard:
			e.extClip = true
		case encH264:
			e.h264 = true
		case encQEMUKeyEvent:
			e.qemuKeys = true
		default:
			switch q := int32(binary.BigEndian.Uint32(list[i:])); {
			case q >= encQualityLevel0 && q <= encQualityLevel9:
				e.jpeg = int(q-encQualityLevel0) + 1
			case q >= encCompressLevel0 && q <= encCompressLevel9:
				e.video = modeOf(int(q - encCompressLevel0))
			}
		}
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.cursor && !c.enc.cursor {
		c.cursorSent = 0 // the shape again
		c.wakeUp()
	}
	if e.eds && !c.enc.eds && c.resize == nil {
		c.resize = &resizeNote{layout: true}
		c.wakeUp()
	}
	if e.extClip && !c.enc.extClip && c.control && h.clipCaps != nil {
		c.queue(h.clipCaps)
	}
	if e.qemuKeys && !c.enc.qemuKeys && h.qemuKeys {
		c.queue(qemuKeysAck)
	}
	c.enc = e
	if !h.wantsVideo(c) {
		c.leaveStream(h.fb.w, h.fb.h)
	}
	return nil
}

// readCutText reads a ClientCutText and passes it to the desktop when the
// client holds control and it is not too long.
func (c *client) readCutText() error {
	b := make([]byte, 8)
	b[0] = msgClientCutText
	if err := readFull(c.conn, b[1:]); err != nil {
		return err
	}
	size := int64(int32(binary.BigEndian.Uint32(b[4:])))
	if size < 0 {
		size = -size
	}
	if !c.control || size > maxCutText {
		return discard(c.conn, size)
	}
	msg := make([]byte, 8+size)
	copy(msg, b)
	if err := readFull(c.conn, msg[8:]); err != nil {
		return err
	}
	return c.hub.send(msg)
}

// readSetDesktopSize reads a SetDesktopSize and, with control, passes it
// on, so that the desktop's answer goes back to this client. A request for
// the layout the screen already has is answered here, as the desktop
// answers it (success to the asker, another client's change to the
// others), with no repaint: nothing changed. A console whose window was a
// fraction of a pixel off the desktop's size asked that every 100 ms, and
// each answer repainted every viewer's whole screen. A layout the hub
// cannot show (a side over maxDimension, an empty or overlapping screen,
// one outside the desktop: validLayout) is refused here as Xvnc refuses
// one (status 3, invalid screen layout): Xvnc takes up to 32768 a side,
// and its answer would end every viewer's console; QEMU takes anything and
// hands the guest its width and height, 0×0 turning its display off. A
// client without control is told it may not (status 1), not ignored.
func (c *client) readSetDesktopSize() error {
	b := make([]byte, 8)
	b[0] = msgSetDesktopSize
	if err := readFull(c.conn, b[1:]); err != nil {
		return err
	}
	msg := make([]byte, 8+16*int(b[6]))
	copy(msg, b)
	if err := readFull(c.conn, msg[8:]); err != nil {
		return err
	}
	h := c.hub
	h.mu.Lock()
	switch {
	case !c.control:
		h.noteResize(c, 1, statusProhibited, false)
	case !validLayout(msg):
		h.noteResize(c, 1, statusInvalidLayout, false)
	case h.hasLayout(msg):
		h.noteResize(c, 1, 0, false)
	default:
		h.resizer = c
		h.mu.Unlock()
		return h.send(msg)
	}
	h.mu.Unlock()
	return nil
}

// write sends the client what is queued and, when it has asked, the
// changed parts of the screen, until ctx ends.
func (c *client) write(ctx context.Context) error {
	for {
		select {
		case <-c.wake:
		case <-ctx.Done():
			return nil
		}
		msgs, upd, err := c.take()
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if _, err := c.conn.Write(m); err != nil {
				return nil // the reader sees the connection end
			}
		}
		if upd != nil {
			msg := upd.encode(c)
			if _, err := c.conn.Write(msg); err != nil {
				return nil
			}
			c.msg = keep(msg)
		}
	}
}
