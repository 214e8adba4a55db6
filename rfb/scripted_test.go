package rfb

import (
	"encoding/binary"
	"net"
	"sync"
	"testing"
	"time"
)

// scriptedDesktop is the desktop's side of a hub's connection for the
// narrow tests of what the hub passes on: it shakes hands, records the
// input messages it gets, and draws frames when told.
type scriptedDesktop struct {
	t          testing.TB
	conn, peer net.Conn
	w, h       int
	wmu        sync.Mutex

	// Set before Connect: the colour of full updates, and a pointer shape
	// sent in an update of its own before each (as Xvnc did), the screen
	// following after paintDelay.
	fill        [3]byte
	cursorFirst *cursorShape
	paintDelay  time.Duration
	qemuKeys    bool   // answers QEMU's Extended Key Event, as QEMU and Xvnc do
	name        string // the desktop's name; "" is "test"

	mu        sync.Mutex
	input     [][]byte // KeyEvent, PointerEvent, ClientCutText, SetDesktopSize, QEMU's extended key
	requests  [][]byte // FramebufferUpdateRequests
	encodings []int32  // the last SetEncodings
	got       chan struct{}
}

func newScriptedDesktop(t testing.TB, w, h int) *scriptedDesktop {
	conn, peer := net.Pipe()
	return newScriptedDesktopOn(t, w, h, conn, peer)
}

// newScriptedDesktopOn is newScriptedDesktop serving on conn, whose other
// end, peer, the hub takes.
func newScriptedDesktopOn(t testing.TB, w, h int, conn, peer net.Conn) *scriptedDesktop {
	d := &scriptedDesktop{t: t, w: w, h: h, got: make(chan struct{}, 100), conn: conn, peer: peer}
	go d.serve()
	t.Cleanup(func() { d.conn.Close() })
	return d
}

func (d *scriptedDesktop) serve() {
	c := d.conn
	b := make([]byte, 64)
	c.Write([]byte("RFB 003.008\n"))
	if readFull(c, b[:12]) != nil {
		return
	}
	c.Write([]byte{1, 1})
	if readFull(c, b[:1]) != nil {
		return
	}
	c.Write([]byte{0, 0, 0, 0})
	if readFull(c, b[:1]) != nil {
		return
	}
	si := binary.BigEndian.AppendUint16(nil, uint16(d.w))
	si = binary.BigEndian.AppendUint16(si, uint16(d.h))
	si = append(si, canonical.marshal()...)
	name := d.name
	if name == "" {
		name = "test"
	}
	si = binary.BigEndian.AppendUint32(si, uint32(len(name)))
	si = append(si, name...)
	d.write(si)
	ackQEMU := false // to send QEMU's answer to the Extended Key Event
	for {
		if readFull(c, b[:1]) != nil {
			return
		}
		var msg []byte
		switch b[0] {
		case msgSetPixelFormat:
			msg = make([]byte, 20)
		case msgSetEncodings:
			if readFull(c, b[1:4]) != nil {
				return
			}
			msg = make([]byte, 4+4*int(binary.BigEndian.Uint16(b[2:4])))
			copy(msg, b[:4])
		case msgUpdateRequest:
			msg = make([]byte, 10)
		case msgKeyEvent:
			msg = make([]byte, 8)
		case msgQEMU:
			msg = make([]byte, qemuKeyEventLen)
		case msgPointerEvent:
			msg = make([]byte, 6)
		case msgClientCutText:
			if readFull(c, b[1:8]) != nil {
				return
			}
			msg = make([]byte, 8+int(binary.BigEndian.Uint32(b[4:8])))
			copy(msg, b[:8])
		case msgSetDesktopSize:
			if readFull(c, b[1:8]) != nil {
				return
			}
			msg = make([]byte, 8+16*int(b[6]))
			copy(msg, b[:8])
		default:
			d.t.Errorf("the hub sent the desktop message type %d", b[0])
			return
		}
		start := 1
		if msg[0] == b[0] && len(msg) > 1 && (b[0] == msgSetEncodings || b[0] == msgClientCutText || b[0] == msgSetDesktopSize) {
			start = map[byte]int{msgSetEncodings: 4, msgClientCutText: 8, msgSetDesktopSize: 8}[b[0]]
		}
		msg[0] = b[0]
		if readFull(c, msg[start:]) != nil {
			return
		}
		switch b[0] {
		case msgSetEncodings:
			var encs []int32
			for i := 4; i < len(msg); i += 4 {
				encs = append(encs, int32(binary.BigEndian.Uint32(msg[i:])))
				ackQEMU = ackQEMU || encs[len(encs)-1] == encQEMUKeyEvent && d.qemuKeys
			}
			d.mu.Lock()
			d.encodings = encs
			d.mu.Unlock()
		case msgUpdateRequest:
			d.mu.Lock()
			d.requests = append(d.requests, msg)
			d.mu.Unlock()
			if msg[1] == 0 && d.cursorFirst != nil {
				go func() { // the hub writes its next request meanwhile
					d.setCursor(d.cursorFirst)
					time.Sleep(d.paintDelay)
					d.frame(d.fill)
				}()
			} else if msg[1] == 0 { // a full update, as a real desktop sends
				d.frame(d.fill)
			}
			if ackQEMU { // after the frame: a pipe has no buffer for the hub's next request
				ackQEMU = false
				ack := []byte{msgFramebufferUpdate, 0, 0, 1, 0, 0, 0, 0, byte(d.w >> 8), byte(d.w), byte(d.h >> 8), byte(d.h)}
				go d.write(append(ack, qemuKeysAck[12:]...)) // the encoding, -258
			}
		case msgKeyEvent, msgPointerEvent, msgClientCutText, msgSetDesktopSize, msgQEMU:
			d.mu.Lock()
			d.input = append(d.input, msg)
			d.mu.Unlock()
			d.got <- struct{}{}
		}
	}
}

func (d *scriptedDesktop) write(b []byte) error {
	d.wmu.Lock()
	defer d.wmu.Unlock()
	_, err := d.conn.Write(b)
	return err
}

// frame draws the whole screen in one colour, as one Raw rectangle.
func (d *scriptedDesktop) frame(c [3]byte) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 1, 0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(d.w))
	b = binary.BigEndian.AppendUint16(b, uint16(d.h))
	b = binary.BigEndian.AppendUint32(b, uint32(encRaw))
	for range d.w * d.h {
		b = append(b, c[0], c[1], c[2], 0)
	}
	return d.write(b)
}

// picture draws the whole screen from canonical pixels, as one Raw
// rectangle.
func (d *scriptedDesktop) picture(pix []byte) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 1, 0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(d.w))
	b = binary.BigEndian.AppendUint16(b, uint16(d.h))
	b = binary.BigEndian.AppendUint32(b, uint32(encRaw))
	return d.write(append(b, pix...))
}

// setCursor sends the pointer's shape.
func (d *scriptedDesktop) setCursor(cur *cursorShape) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 1}
	return d.write(appendCursor(b, cur, canonical))
}

// cutText sends the desktop's clipboard.
func (d *scriptedDesktop) cutText(text string) error {
	b := []byte{msgServerCutText, 0, 0, 0}
	b = binary.BigEndian.AppendUint32(b, uint32(len(text)))
	return d.write(append(b, text...))
}

// inputs returns the input messages the desktop got.
func (d *scriptedDesktop) inputs() [][]byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([][]byte(nil), d.input...)
}

// grow changes the screen's size to a larger w×h, as the desktop's own
// change (ExtendedDesktopSize, reason 0), and paints it in one colour.
// Later full updates still paint the first size's area.
func (d *scriptedDesktop) grow(w, h int, c [3]byte) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 2, 0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	eds := int32(encExtendedDesktopSize)
	b = binary.BigEndian.AppendUint32(b, uint32(eds))
	b = append(b, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(w))
	b = binary.BigEndian.AppendUint16(b, uint16(h))
	b = binary.BigEndian.AppendUint32(b, uint32(encRaw))
	for range w * h {
		b = append(b, c[0], c[1], c[2], 0)
	}
	return d.write(b)
}

// answer answers a SetDesktopSize with status, at the size the screen has
// (ExtendedDesktopSize, reason 1), as QEMU answers 4 (passed to the
// guest) before the guest sets its mode.
func (d *scriptedDesktop) answer(status int) error {
	b := []byte{msgFramebufferUpdate, 0, 0, 1, 0, 1, byte(status >> 8), byte(status)}
	b = binary.BigEndian.AppendUint16(b, uint16(d.w))
	b = binary.BigEndian.AppendUint16(b, uint16(d.h))
	eds := int32(encExtendedDesktopSize)
	b = binary.BigEndian.AppendUint32(b, uint32(eds))
	return d.write(append(b, oneScreen(d.w, d.h)...))
}
