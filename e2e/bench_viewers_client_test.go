package e2e

import (
	"bufio"
	"bytes"
	be "encoding/binary"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// h264Viewer is a VNC client of a console websocket that asks for what
// noVNC asks for where WebCodecs decodes H.264 (Open H.264 right after
// CopyRect, then Tight, ZRLE and Raw; the Picture choice Auto, noVNC's
// compression level 2), reads every update as it comes and asks for the
// next one as soon as it has read it, as noVNC does. It decodes nothing:
// it counts the H.264 frames it got (an update may carry several access
// units for a viewer that fell behind: each has one slice), their bytes,
// and the rectangles that came as tiles.
type h264Viewer struct {
	ws           *websocket.Conn
	frames, keys atomic.Int64 // slices received, and of those IDRs
	videoBytes   atomic.Int64
	tiles        atomic.Int64 // rectangles in any encoding but H.264
	done         chan struct{}
	err          error // why reading ended, once done is closed
}

// viewerEncodings is what h264Viewer asks for, in noVNC 1.7.0's order
// (core/rfb.js _sendEncodings): CopyRect, Open H.264, Tight, ZRLE, Raw,
// JPEG quality 6 and compression level 2 (Auto), DesktopSize, LastRect,
// ExtendedDesktopSize and the cursor.
var viewerEncodings = []int32{1, 50, 7, 16, 0, -32 + 6, -256 + 2, -223, -224, -308, -239}

// startH264Viewer shakes hands on ws (shakeRFB), asks for viewerEncodings
// and the whole screen, and reads until ws closes.
func startH264Viewer(t *testing.T, ws *websocket.Conn) *h264Viewer {
	t.Helper()
	rv, err := shakeRFB(ws)
	if err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Time{})
	enc := []byte{2, 0, 0, byte(len(viewerEncodings))}
	for _, e := range viewerEncodings {
		enc = be.BigEndian.AppendUint32(enc, uint32(e))
	}
	must(t, ws.WriteMessage(websocket.BinaryMessage, enc))
	must(t, ws.WriteMessage(websocket.BinaryMessage, updateRequest(0, rv.w, rv.h)))
	v := &h264Viewer{ws: ws, done: make(chan struct{})}
	r := bufio.NewReaderSize(io.MultiReader(bytes.NewReader(rv.buf), &wsReader{ws: ws}), 64<<10)
	go func() {
		defer close(v.done)
		v.err = v.read(r, rv.w, rv.h)
	}()
	return v
}

// close ends the viewer's console and waits for its reader.
func (v *h264Viewer) close() {
	v.ws.Close()
	<-v.done
}

// updateRequest is a FramebufferUpdateRequest for a w×h screen.
func updateRequest(incremental byte, w, h int) []byte {
	return []byte{3, incremental, 0, 0, 0, 0, byte(w >> 8), byte(w), byte(h >> 8), byte(h)}
}

// read follows the server's messages until the connection ends, asking
// for the next update after each one.
func (v *h264Viewer) read(r *bufio.Reader, w, h int) error {
	var hdr [12]byte
	for {
		typ, err := r.ReadByte()
		if err != nil {
			return err
		}
		switch typ {
		case 0: // FramebufferUpdate
			if _, err := io.ReadFull(r, hdr[:3]); err != nil {
				return err
			}
			for n := be.BigEndian.Uint16(hdr[1:]); n > 0; n-- {
				if _, err := io.ReadFull(r, hdr[:]); err != nil {
					return err
				}
				rw, rh := int(be.BigEndian.Uint16(hdr[4:])), int(be.BigEndian.Uint16(hdr[6:]))
				enc := int32(be.BigEndian.Uint32(hdr[8:]))
				if enc == -224 { // LastRect
					break
				}
				if enc == -223 || enc == -308 { // the screen's size
					w, h = rw, rh
				}
				if err := v.rect(r, enc, rw, rh); err != nil {
					return err
				}
			}
			if err := v.ws.WriteMessage(websocket.BinaryMessage, updateRequest(1, w, h)); err != nil {
				return err
			}
		case 2: // Bell
		case 3: // ServerCutText: its length's top bit marks the extended format
			if _, err := io.ReadFull(r, hdr[:7]); err != nil {
				return err
			}
			if err := skip(r, int64(be.BigEndian.Uint32(hdr[3:])&0x7fffffff)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("server message type %d; the viewer follows updates, bells and cut text", typ)
		}
	}
}

// rect reads one rectangle's data in encoding enc.
func (v *h264Viewer) rect(r *bufio.Reader, enc int32, w, h int) error {
	var b [8]byte
	switch enc {
	case 50: // Open H.264: length, flags, an access unit (or several)
		if _, err := io.ReadFull(r, b[:8]); err != nil {
			return err
		}
		au := make([]byte, be.BigEndian.Uint32(b[:4]))
		if _, err := io.ReadFull(r, au); err != nil {
			return err
		}
		v.videoBytes.Add(int64(len(au)))
		for _, typ := range nalTypes(au) {
			if typ == 1 || typ == 5 {
				v.frames.Add(1)
			}
			if typ == 5 {
				v.keys.Add(1)
			}
		}
		return nil
	case -223: // DesktopSize
		return nil
	case -308: // ExtendedDesktopSize: screens of 16 bytes
		if _, err := io.ReadFull(r, b[:4]); err != nil {
			return err
		}
		return skip(r, 16*int64(b[0]))
	case -239: // Cursor: pixels and a bit mask
		return skip(r, int64(w*h*4+(w+7)/8*h))
	}
	v.tiles.Add(1)
	switch enc {
	case 0:
		return skip(r, int64(w*h*4))
	case 1:
		return skip(r, 4)
	case 7:
		return tightSkip(r, w, h)
	case 16:
		if _, err := io.ReadFull(r, b[:4]); err != nil {
			return err
		}
		return skip(r, int64(be.BigEndian.Uint32(b[:4])))
	}
	return fmt.Errorf("a rectangle in encoding %d, which the viewer did not ask for", enc)
}

// tightSkip reads a Tight rectangle of a 24-bit screen (3-byte pixels)
// without decoding it: a fill, a JPEG, or basic compression with an
// optional filter, whose data is raw below 12 bytes and otherwise a
// compact length and that much zlib.
func tightSkip(r *bufio.Reader, w, h int) error {
	c, err := r.ReadByte()
	if err != nil {
		return err
	}
	n := int64(w * h * 3)
	switch k := c >> 4; {
	case k == 8: // fill
		return skip(r, 3)
	case k == 9 || k == 10: // JPEG, PNG
		return tightData(r, 12)
	case k > 10:
		return fmt.Errorf("Tight compression control %#x", c)
	case k&4 != 0: // a filter follows
		f, err := r.ReadByte()
		if err != nil {
			return err
		}
		switch f {
		case 0, 2: // copy, gradient
		case 1: // palette
			m, err := r.ReadByte()
			if err != nil {
				return err
			}
			colours := int64(m) + 1
			if err := skip(r, colours*3); err != nil {
				return err
			}
			if n = int64(w * h); colours == 2 {
				n = int64((w + 7) / 8 * h)
			}
		default:
			return fmt.Errorf("Tight filter %d", f)
		}
	}
	return tightData(r, n)
}

// tightData skips n bytes of Tight data: raw below 12, else a compact
// length (7 bits a byte, low first) and that much.
func tightData(r *bufio.Reader, n int64) error {
	if n < 12 {
		return skip(r, n)
	}
	var size int64
	for i := 0; i < 3; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return err
		}
		if i == 2 {
			size |= int64(b) << 14
			break
		}
		size |= int64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			break
		}
	}
	return skip(r, size)
}

// skip discards n bytes of r.
func skip(r *bufio.Reader, n int64) error {
	_, err := io.CopyN(io.Discard, r, n)
	return err
}

// nalTypes returns the type of each NAL unit of an Annex-B stream.
func nalTypes(b []byte) []byte {
	var out []byte
	for i := 0; i+3 < len(b); i++ {
		if b[i] == 0 && b[i+1] == 0 && b[i+2] == 1 {
			out = append(out, b[i+3]&0x1f)
			i += 3
		}
	}
	return out
}

// wsReader reads a websocket's binary messages as one stream.
type wsReader struct {
	ws *websocket.Conn
	r  io.Reader
}

func (w *wsReader) Read(p []byte) (int, error) {
	for {
		if w.r == nil {
			_, r, err := w.ws.NextReader()
			if err != nil {
				return 0, err
			}
			w.r = r
		}
		n, err := w.r.Read(p)
		if err == io.EOF {
			w.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}
