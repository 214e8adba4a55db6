package e2e

import (
	"crypto/sha256"
	be "encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// rfbViewer is a VNC client of a console websocket that asks for Raw
// pixels only, so that a test can compare what clients see byte for byte.
// Once it has shaken hands (listen) it reads the socket all the time, as
// a real client does: one that read only when its test asked for a
// screen left the portal's pings unanswered while the test did something
// else for longer than the portal waits for a pong (a loaded machine),
// and the portal ended it.
type rfbViewer struct {
	ws       *websocket.Conn
	msgs     chan []byte   // the server's messages, as they came
	ended    chan struct{} // closed once reading ended, with err
	err      error
	deadline time.Time // when read gives up
	buf      []byte
	w, h     int
	fb       []byte // 4 bytes a pixel, in the server's format
}

// readAll reads the server's messages into v.msgs until the socket ends.
func (v *rfbViewer) readAll() {
	defer close(v.ended)
	for {
		_, b, err := v.ws.ReadMessage()
		if err != nil {
			v.err = err
			return
		}
		v.msgs <- b
	}
}

// newRFBViewer shakes hands (security None, shared) and asks for Raw.
func newRFBViewer(t *testing.T, ws *websocket.Conn) *rfbViewer {
	t.Helper()
	v, err := shakeRFB(ws)
	if err != nil {
		t.Fatal(err)
	}
	v.listen()
	return v
}

// listen starts reading the socket all the time (see rfbViewer).
func (v *rfbViewer) listen() {
	v.ws.SetReadDeadline(time.Time{})
	v.msgs, v.ended = make(chan []byte, 4096), make(chan struct{})
	go v.readAll()
}

// end waits until the socket ends, reading what comes, and returns what
// ended it (a close frame is a *websocket.CloseError), or a timeout
// error once until passes.
func (v *rfbViewer) end(until time.Time) error {
	v.deadline = until
	for {
		if _, err := v.read(len(v.buf) + 1); err != nil {
			return err
		}
	}
}

// shakeRFB is newRFBViewer's handshake, for a caller that tries again
// on an error.
func shakeRFB(ws *websocket.Conn) (*rfbViewer, error) {
	v := &rfbViewer{ws: ws, deadline: time.Now().Add(20 * time.Second)}
	if _, err := v.read(12); err != nil {
		return nil, fmt.Errorf("RFB greeting: %w", err)
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	n, err := v.read(1)
	if err != nil {
		return nil, fmt.Errorf("RFB security types: %w", err)
	}
	if _, err := v.read(int(n[0])); err != nil {
		return nil, err
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte{1}); err != nil {
		return nil, err
	}
	if _, err := v.read(4); err != nil {
		return nil, err
	}
	if err := ws.WriteMessage(websocket.BinaryMessage, []byte{1}); err != nil { // shared
		return nil, err
	}
	init, err := v.read(24)
	if err != nil {
		return nil, fmt.Errorf("RFB ServerInit: %w", err)
	}
	v.w, v.h = int(be.BigEndian.Uint16(init[0:])), int(be.BigEndian.Uint16(init[2:]))
	if init[4] != 32 {
		return nil, fmt.Errorf("the server's pixels have %d bits; want 32", init[4])
	}
	if _, err := v.read(int(be.BigEndian.Uint32(init[20:]))); err != nil {
		return nil, err
	}
	v.fb = make([]byte, v.w*v.h*4)
	// SetEncodings: Raw
	return v, ws.WriteMessage(websocket.BinaryMessage, []byte{2, 0, 0, 1, 0, 0, 0, 0})
}

// read returns the next n bytes of the server, whatever their framing,
// or an error once the socket ended or v.deadline passed.
func (v *rfbViewer) read(n int) ([]byte, error) {
	for len(v.buf) < n && v.msgs == nil { // not listening yet: read here
		v.ws.SetReadDeadline(v.deadline)
		_, b, err := v.ws.ReadMessage()
		if err != nil {
			return nil, err
		}
		v.buf = append(v.buf, b...)
	}
	if len(v.buf) < n {
		timeout := time.NewTimer(time.Until(v.deadline))
		defer timeout.Stop()
		for len(v.buf) < n {
			select {
			case b := <-v.msgs:
				v.buf = append(v.buf, b...)
			case <-v.ended:
				select {
				case b := <-v.msgs: // what came before the end first
					v.buf = append(v.buf, b...)
				default:
					return nil, v.err
				}
			case <-timeout.C:
				return nil, fmt.Errorf("no answer from the server by %s", v.deadline.Format("15:04:05.000"))
			}
		}
	}
	out := v.buf[:n:n]
	v.buf = v.buf[n:]
	return out, nil
}

func (v *rfbViewer) send(t *testing.T, b []byte) {
	t.Helper()
	if err := v.ws.WriteMessage(websocket.BinaryMessage, b); err != nil {
		t.Fatalf("RFB send: %v", err)
	}
}

// screen asks for the whole screen and returns a hash of it.
func (v *rfbViewer) screen(t *testing.T) (string, error) {
	t.Helper()
	req := []byte{3, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	be.BigEndian.PutUint16(req[6:], uint16(v.w))
	be.BigEndian.PutUint16(req[8:], uint16(v.h))
	if err := v.ws.WriteMessage(websocket.BinaryMessage, req); err != nil {
		return "", err
	}
	v.deadline = time.Now().Add(15 * time.Second)
	for {
		typ, err := v.read(1)
		if err != nil {
			return "", err
		}
		switch typ[0] {
		case 0: // FramebufferUpdate
			hdr, err := v.read(3)
			if err != nil {
				return "", err
			}
			for range be.BigEndian.Uint16(hdr[1:]) {
				r, err := v.read(12)
				if err != nil {
					return "", err
				}
				x, y := int(be.BigEndian.Uint16(r[0:])), int(be.BigEndian.Uint16(r[2:]))
				w, h := int(be.BigEndian.Uint16(r[4:])), int(be.BigEndian.Uint16(r[6:]))
				if enc := int32(be.BigEndian.Uint32(r[8:])); enc != 0 {
					t.Fatalf("a rectangle in encoding %d; the viewer asked for Raw only", enc)
				}
				pix, err := v.read(w * h * 4)
				if err != nil {
					return "", err
				}
				for row := range h {
					copy(v.fb[((y+row)*v.w+x)*4:], pix[row*w*4:(row+1)*w*4])
				}
			}
			sum := sha256.Sum256(v.fb)
			return hex.EncodeToString(sum[:8]), nil
		case 2: // Bell
		case 3: // ServerCutText
			hdr, err := v.read(7)
			if err != nil {
				return "", err
			}
			if _, err := v.read(int(be.BigEndian.Uint32(hdr[3:]))); err != nil {
				return "", err
			}
		default:
			t.Fatalf("server message type %d; the viewer expects updates, bells and cut text", typ[0])
		}
	}
}

// typeText sends each letter of s as a key press and release.
func (v *rfbViewer) typeText(t *testing.T, s string) {
	t.Helper()
	for _, r := range s {
		for _, down := range []byte{1, 0} {
			k := []byte{4, down, 0, 0, 0, 0, 0, 0}
			be.BigEndian.PutUint32(k[4:], uint32(r))
			v.send(t, k)
		}
	}
}
