package rfb

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"testing"
	"time"
)

// testClient is a browser's side of a console for the tests: RFB 3.8,
// the canonical pixel format, Tight, ZRLE or Raw, following size changes.
type testClient struct {
	t     testing.TB
	conn  net.Conn
	fb    framebuffer
	zrle  zrleDecoder
	tight tightDecoder
	// The last ExtendedDesktopSize rectangle's reason and status.
	reason, status int
	cutTexts       [][]byte
	rects          map[int32]int // rectangles read, by encoding
	cursor         *cursorShape  // the last Cursor rectangle
	h264           []h264Payload // the Open H.264 rectangles read
	tiled          int           // pixels painted by tiles since the last H.264 rectangle
}

// h264Payload is one Open H.264 rectangle as a client read it.
type h264Payload struct {
	r     Rect
	flags uint32
	data  []byte
}

func dialTestClient(t testing.TB, conn net.Conn, encs ...int32) *testClient {
	t.Helper()
	conn = writeDeadline{conn}
	c := &testClient{t: t, conn: conn, reason: -1, rects: map[int32]int{}}
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	b := make([]byte, 12)
	must(t, readFull(conn, b))
	conn.Write([]byte("RFB 003.008\n"))
	must(t, readFull(conn, b[:2])) // one type: None
	conn.Write([]byte{1})
	must(t, readFull(conn, b[:4]))
	conn.Write([]byte{1})
	si := make([]byte, 24)
	must(t, readFull(conn, si))
	name := make([]byte, binary.BigEndian.Uint32(si[20:]))
	must(t, readFull(conn, name))
	c.fb.resize(int(binary.BigEndian.Uint16(si)), int(binary.BigEndian.Uint16(si[2:])))
	msg := append([]byte{msgSetPixelFormat, 0, 0, 0}, canonical.marshal()...)
	msg = append(msg, msgSetEncodings, 0, 0, byte(len(encs)))
	for _, e := range encs {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	_, err := conn.Write(msg)
	must(t, err)
	return c
}

// writeDeadline gives each write of a test client 20 s of its own: one
// deadline set at dial time would fail every write of a test that runs
// longer than that on a loaded machine, and a dropped update request
// then reads as a hub that never answered.
type writeDeadline struct{ net.Conn }

func (c writeDeadline) Write(b []byte) (int, error) {
	c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	return c.Conn.Write(b)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// request asks for an update of the whole screen.
func (c *testClient) request(incremental bool) {
	c.conn.Write(updateRequest(incremental, c.fb.w, c.fb.h))
}

// next reads messages up to and including the next FramebufferUpdate.
func (c *testClient) next() error {
	c.conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	var t [1]byte
	for {
		if err := readFull(c.conn, t[:]); err != nil {
			return err
		}
		switch t[0] {
		case msgBell:
			continue
		case msgServerCutText:
			h := make([]byte, 7)
			if err := readFull(c.conn, h); err != nil {
				return err
			}
			n := int32(binary.BigEndian.Uint32(h[3:]))
			if n < 0 {
				n = -n
			}
			text := make([]byte, n)
			if err := readFull(c.conn, text); err != nil {
				return err
			}
			c.cutTexts = append(c.cutTexts, text)
			continue
		case msgFramebufferUpdate:
		default:
			return fmt.Errorf("server message %d", t[0])
		}
		h := make([]byte, 3)
		if err := readFull(c.conn, h); err != nil {
			return err
		}
		for range int(binary.BigEndian.Uint16(h[1:])) {
			rh := make([]byte, 12)
			if err := readFull(c.conn, rh); err != nil {
				return err
			}
			r := Rect{int(binary.BigEndian.Uint16(rh[0:])), int(binary.BigEndian.Uint16(rh[2:])), int(binary.BigEndian.Uint16(rh[4:])), int(binary.BigEndian.Uint16(rh[6:]))}
			enc := int32(binary.BigEndian.Uint32(rh[8:]))
			c.rects[enc]++
			switch enc {
			case encExtendedDesktopSize:
				var n [4]byte
				if err := readFull(c.conn, n[:]); err != nil {
					return err
				}
				if _, err := io.CopyN(io.Discard, c.conn, 16*int64(n[0])); err != nil {
					return err
				}
				c.reason, c.status = r.X, r.Y
				if r.Y == 0 {
					c.fb.resize(r.W, r.H)
				}
			case encDesktopSize:
				c.fb.resize(r.W, r.H)
			case encLastRect:
				return nil
			case encQEMUKeyEvent: // no data
			case encH264:
				var lf [8]byte
				if err := readFull(c.conn, lf[:]); err != nil {
					return err
				}
				data := make([]byte, binary.BigEndian.Uint32(lf[:]))
				if err := readFull(c.conn, data); err != nil {
					return err
				}
				c.h264 = append(c.h264, h264Payload{r, binary.BigEndian.Uint32(lf[4:]), data})
				c.tiled = 0
			case encCursor:
				cur := &cursorShape{x: r.X, y: r.Y, w: r.W, h: r.H, pix: make([]byte, r.W*r.H*4), mask: make([]byte, (r.W+7)/8*r.H)}
				if err := readFull(c.conn, cur.pix); err != nil {
					return err
				}
				if err := readFull(c.conn, cur.mask); err != nil {
					return err
				}
				c.cursor = cur
			case encTight:
				if !r.inside(c.fb.w, c.fb.h) {
					return fmt.Errorf("rectangle %+v outside %dx%d", r, c.fb.w, c.fb.h)
				}
				pix, err := c.tight.decode(c.conn, r)
				if err != nil {
					return err
				}
				c.fb.put(r, pix)
				c.tiled += r.W * r.H
			case encRaw, encZRLE:
				if !r.inside(c.fb.w, c.fb.h) {
					return fmt.Errorf("rectangle %+v outside %dx%d", r, c.fb.w, c.fb.h)
				}
				pix := make([]byte, r.W*r.H*4)
				if enc == encRaw {
					if err := readFull(c.conn, pix); err != nil {
						return err
					}
				} else if err := c.zrle.decode(c.conn, r, pix); err != nil {
					return err
				}
				c.fb.put(r, pix)
				c.tiled += r.W * r.H
			default:
				return fmt.Errorf("encoding %d", enc)
			}
		}
		return nil
	}
}

// pixel returns the colour at (x, y) as R, G, B.
func (c *testClient) pixel(x, y int) [3]byte {
	o := (y*c.fb.w + x) * 4
	return [3]byte{c.fb.pix[o], c.fb.pix[o+1], c.fb.pix[o+2]}
}
