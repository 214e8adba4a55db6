package rfb

import "encoding/binary"

// QEMU's Extended Key Event: a client that lists the pseudo-encoding
// -258 and is answered with a rectangle of it by the server may send
// keys as message 255, subtype 0: U16 down, U32 keysym, U32 XT scan code
// (an 0xE0-prefixed one with its high bit set). QEMU then types the scan
// code, so the guest's own keyboard layout applies, rather than mapping
// the keysym through its own keymap (en-us), which drops what a US
// keyboard lacks (ü, é, €). The hub asks the desktop for it; once the
// desktop answers, it answers each client that asks and passes such keys
// on whole. A desktop that never offered it (Xvnc) gets a client's
// extended key as a plain KeyEvent of its keysym.

// encQEMUKeyEvent is the pseudo-encoding of QEMU's Extended Key Event.
const encQEMUKeyEvent int32 = -258

const (
	msgQEMU         = 255 // client message: QEMU's, subtype first
	qemuKeyEvent    = 0   // subtype: extended key event
	qemuKeyEventLen = 12
)

// qemuKeysAck is the FramebufferUpdate that tells a client the desktop
// takes extended key events: one empty rectangle of encoding -258.
var qemuKeysAck = []byte{msgFramebufferUpdate, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xfe, 0xfe}

// offerQEMUKeys notes that the desktop takes extended key events and
// tells every client that asked for them.
func (h *Hub) offerQEMUKeys() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.qemuKeys {
		return
	}
	h.qemuKeys = true
	for c := range h.clients {
		if c.enc.qemuKeys {
			c.queue(qemuKeysAck)
		}
	}
}

// readQEMU reads a QEMU client message (its type read): an extended key
// event goes to the desktop as it is when the desktop takes them, else as
// a KeyEvent of its keysym; only from a client that holds control. Any
// other subtype (QEMU's audio, which the hub never offers) is a protocol
// error.
func (c *client) readQEMU() error {
	b := make([]byte, qemuKeyEventLen)
	b[0] = msgQEMU
	if err := readFull(c.conn, b[1:2]); err != nil {
		return err
	}
	if b[1] != qemuKeyEvent {
		return protocolErr("QEMU client message subtype %d", b[1])
	}
	if err := readFull(c.conn, b[2:]); err != nil {
		return err
	}
	if !c.control {
		return nil
	}
	h := c.hub
	h.mu.Lock()
	pass := h.qemuKeys
	h.mu.Unlock()
	if pass {
		return h.send(b)
	}
	keysym := binary.BigEndian.Uint32(b[4:])
	if keysym == 0 { // a scan code alone: nothing a keysym server can type
		return nil
	}
	down := byte(0)
	if b[2] != 0 || b[3] != 0 {
		down = 1
	}
	return h.send(binary.BigEndian.AppendUint32([]byte{msgKeyEvent, down, 0, 0}, keysym))
}
