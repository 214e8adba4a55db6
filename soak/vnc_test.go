package soak

import (
	"bufio"
	rfbbin "encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// A VNC load session is a real RFB client of a real Xvnc: it signs in
// (security None), asks for raw pixels only, then every period asks for a
// 64x64 tile of the screen (not incremental, so Xvnc always answers with
// pixels) and times until the whole tile is read. Through the portal the
// stream rides the websocket relay; the baseline dials Xvnc's socket.

// vncTile is the side of the square a VNC load session asks for.
const vncTile = 64

// rfbClient speaks the client side of RFB 3.8 over a stream.
type rfbClient struct {
	r      *bufio.Reader
	w      io.Writer
	width  int
	height int
	bpp    int // bytes per pixel
}

// newRFBClient signs in on rw and asks for raw pixels.
func newRFBClient(rw io.ReadWriter) (*rfbClient, error) {
	c := &rfbClient{r: bufio.NewReaderSize(rw, 64<<10), w: rw}
	version := make([]byte, 12)
	if _, err := io.ReadFull(c.r, version); err != nil {
		return nil, fmt.Errorf("rfb version: %w", err)
	}
	if !strings.HasPrefix(string(version), "RFB ") {
		return nil, fmt.Errorf("rfb version %q", version)
	}
	if _, err := c.w.Write([]byte("RFB 003.008\n")); err != nil {
		return nil, err
	}
	n, err := c.r.ReadByte()
	if err != nil || n == 0 {
		return nil, fmt.Errorf("rfb security types: %d %v", n, err)
	}
	types := make([]byte, n)
	if _, err := io.ReadFull(c.r, types); err != nil {
		return nil, err
	}
	if !strings.ContainsRune(string(types), 1) {
		return nil, fmt.Errorf("rfb: no security type None in %v", types)
	}
	if _, err := c.w.Write([]byte{1}); err != nil {
		return nil, err
	}
	var result uint32
	if err := rfbbin.Read(c.r, rfbbin.BigEndian, &result); err != nil || result != 0 {
		return nil, fmt.Errorf("rfb security result %d %v", result, err)
	}
	if _, err := c.w.Write([]byte{1}); err != nil { // ClientInit: shared
		return nil, err
	}
	var init struct {
		W, H   uint16
		Format [16]byte
		Name   uint32
	}
	if err := rfbbin.Read(c.r, rfbbin.BigEndian, &init); err != nil {
		return nil, fmt.Errorf("rfb server init: %w", err)
	}
	if _, err := c.r.Discard(int(init.Name)); err != nil {
		return nil, err
	}
	c.width, c.height, c.bpp = int(init.W), int(init.H), int(init.Format[0])/8
	// SetEncodings: raw only, so a tile is exactly w*h*bpp bytes.
	if _, err := c.w.Write([]byte{2, 0, 0, 1, 0, 0, 0, 0}); err != nil {
		return nil, err
	}
	return c, nil
}

// tile asks for the tile at (x, y) and reads the update that answers it,
// skipping bells and clipboard messages.
func (c *rfbClient) tile(x, y int) error {
	req := []byte{3, 0, 0, 0, 0, 0, 0, vncTile, 0, vncTile}
	rfbbin.BigEndian.PutUint16(req[2:], uint16(x))
	rfbbin.BigEndian.PutUint16(req[4:], uint16(y))
	if _, err := c.w.Write(req); err != nil {
		return err
	}
	for {
		t, err := c.r.ReadByte()
		if err != nil {
			return err
		}
		switch t {
		case 0: // FramebufferUpdate
			var hdr struct {
				Pad   byte
				Rects uint16
			}
			if err := rfbbin.Read(c.r, rfbbin.BigEndian, &hdr); err != nil {
				return err
			}
			for range hdr.Rects {
				var rect struct {
					X, Y, W, H uint16
					Encoding   int32
				}
				if err := rfbbin.Read(c.r, rfbbin.BigEndian, &rect); err != nil {
					return err
				}
				if rect.Encoding != 0 {
					return fmt.Errorf("rfb: rect encoding %d, asked for raw only", rect.Encoding)
				}
				if _, err := c.r.Discard(int(rect.W) * int(rect.H) * c.bpp); err != nil {
					return err
				}
			}
			return nil
		case 2: // Bell
		case 3: // ServerCutText
			var hdr struct {
				Pad [3]byte
				Len uint32
			}
			if err := rfbbin.Read(c.r, rfbbin.BigEndian, &hdr); err != nil {
				return err
			}
			if _, err := c.r.Discard(int(hdr.Len)); err != nil {
				return err
			}
		default:
			return fmt.Errorf("rfb: server message type %d", t)
		}
	}
}

// wsStream is a websocket as a byte stream: binary messages in, each
// Write one binary message out.
type wsStream struct {
	ws  *websocket.Conn
	cur io.Reader
}

func (s *wsStream) Read(p []byte) (int, error) {
	for {
		if s.cur != nil {
			n, err := s.cur.Read(p)
			if n > 0 || !errors.Is(err, io.EOF) {
				return n, err
			}
		}
		_, r, err := s.ws.NextReader()
		if err != nil {
			return 0, err
		}
		s.cur = r
	}
}

func (s *wsStream) Write(p []byte) (int, error) {
	if err := s.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// vncSession is one VNC console under load.
type vncSession struct {
	ws   *websocket.Conn
	c    *rfbClient
	mu   sync.Mutex
	rtts []time.Duration
	n    int64 // pixel bytes read
	err  error
}

// openVNC opens and signs in a VNC session through the portal.
func openVNC(base, user, member string) (*vncSession, error) {
	ws, err := dialConsole(base, user, "/ws/vnc/local/"+member)
	if err != nil {
		return nil, err
	}
	c, err := newRFBClient(&wsStream{ws: ws})
	if err != nil {
		ws.Close()
		return nil, fmt.Errorf("vnc %s: %w", member, err)
	}
	return &vncSession{ws: ws, c: c}, nil
}

// loop asks for a tile every period until end, walking the screen.
func (s *vncSession) loop(id int, period time.Duration, end time.Time) {
	cols, rows := max(s.c.width/vncTile, 1), max(s.c.height/vncTile, 1)
	for n := id; time.Now().Before(end); n++ {
		x, y := (n%cols)*vncTile, (n/cols%rows)*vncTile
		s.ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		s.ws.SetWriteDeadline(time.Now().Add(15 * time.Second))
		t0 := time.Now()
		if err := s.c.tile(x, y); err != nil {
			s.err = fmt.Errorf("vnc session %d: tile (%d,%d): %w", id, x, y, err)
			return
		}
		s.mu.Lock()
		s.rtts = append(s.rtts, time.Since(t0))
		s.n += vncTile * vncTile * int64(s.c.bpp)
		s.mu.Unlock()
		time.Sleep(period)
	}
}

// directVNC measures the same tile round trip on Xvnc's own socket,
// without the portal: the baseline of the VNC sessions' added latency.
func directVNC(sock string, n int) (time.Duration, error) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	c, err := newRFBClient(conn)
	if err != nil {
		return 0, err
	}
	var rtts []time.Duration
	for i := range n {
		t0 := time.Now()
		if err := c.tile((i%4)*vncTile, 0); err != nil {
			return 0, err
		}
		rtts = append(rtts, time.Since(t0))
	}
	return percentile(rtts, 50), nil
}

// vncLoadReport adds the VNC sessions' lines: none dropped, the tile round
// trip through the portal against Xvnc's own socket, and the pixels moved.
func vncLoadReport(r *report, vncs []*vncSession, desktops int, loadFor, took, base time.Duration, baseErr error) {
	var all []time.Duration
	var pixels int64
	dropped := 0
	var firstErr error
	for _, s := range vncs {
		all = append(all, s.rtts...)
		pixels += s.n
		if s.err != nil {
			dropped++
			if firstErr == nil {
				firstErr = s.err
			}
		}
		s.ws.Close()
	}
	r.add("load", fmt.Sprintf("%d VNC sessions on %d real desktops, %s", len(vncs), desktops, loadFor), dropped == 0 && len(all) > 0,
		"0 dropped", "%d dropped, %d tiles of %dx%d answered %s", dropped, len(all), vncTile, vncTile, errOr(firstErr, ""))
	p50, p99 := percentile(all, 50), percentile(all, 99)
	r.add("load", "VNC tile round trip p50 / p99 (through portal)", len(all) > 0 && p99 < 2*time.Second, "p99 < 2 s", "%s / %s", ms(p50), ms(p99))
	r.add("load", "VNC added latency p50 vs Xvnc's own socket", baseErr == nil && p50-base < 500*time.Millisecond, "< 500 ms",
		"%s (direct p50 %s) %s", ms(p50-base), ms(base), errOr(baseErr, ""))
	r.add("load", "VNC throughput desktop -> clients", pixels > 0, "> 0", "%.1f MiB/s of pixels in all", float64(pixels)/(1<<20)/took.Seconds())
}
