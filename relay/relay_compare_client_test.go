package relay_test

// The benchmark's two ends of each relayed connection: the desktops
// (a listener the relays dial) and the websocket clients.

import (
	"bufio"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// desktops accepts the desktop ends of relayed connections.
type desktops struct {
	ln    net.Listener
	conns chan net.Conn
}

// startDesktops listens for relayed connections; every accepted one is
// handed to conns.
func startDesktops(tb testing.TB) *desktops {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	d := &desktops{ln: ln, conns: make(chan net.Conn, echoSessions)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(d.conns)
				return
			}
			d.conns <- c
		}
	}()
	tb.Cleanup(func() { ln.Close() })
	return d
}

// accept returns the next relayed desktop connection.
func (d *desktops) accept(tb testing.TB) net.Conn {
	tb.Helper()
	select {
	case c := <-d.conns:
		return c
	case <-time.After(10 * time.Second):
		tb.Fatal("the relay did not dial the desktop")
		return nil
	}
}

// benchClient is the client end of one relayed session: raw bytes for the
// TCP relay, websocket frames it writes and parses itself for the others,
// so that the client costs the same whatever relay it talks to.
type benchClient struct {
	conn   net.Conn
	br     *bufio.Reader
	framed bool
	hdr    [14]byte
	left   int64 // payload bytes left in the frame being read
}

// dialClient opens a session through r.
func dialClient(tb testing.TB, r *benchRelay) *benchClient {
	tb.Helper()
	if r.kind == "tcp" {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			tb.Fatal(err)
		}
		return &benchClient{conn: c, br: bufio.NewReaderSize(c, chunk)}
	}
	d := websocket.Dialer{Subprotocols: []string{"binary"}, HandshakeTimeout: 10 * time.Second}
	ws, _, err := d.Dial("ws://"+r.addr+"/", nil)
	if err != nil {
		tb.Fatalf("%s: %v", r.kind, err)
	}
	c := ws.NetConn()
	return &benchClient{conn: c, br: bufio.NewReaderSize(c, chunk), framed: true}
}

// frame returns what the client writes to send payload.
func (c *benchClient) frame(payload []byte) []byte {
	if !c.framed {
		return payload
	}
	return maskedFrame(websocket.BinaryMessage, payload)
}

// read reads payload bytes into p (whole frames' payload for a websocket,
// skipping control frames) and returns how many.
func (c *benchClient) read(p []byte) (int, error) {
	if !c.framed {
		return c.br.Read(p)
	}
	for c.left == 0 {
		if _, err := io.ReadFull(c.br, c.hdr[:2]); err != nil {
			return 0, err
		}
		op, n := c.hdr[0]&0x0f, int64(c.hdr[1]&0x7f)
		switch n {
		case 126:
			if _, err := io.ReadFull(c.br, c.hdr[:2]); err != nil {
				return 0, err
			}
			n = int64(binary.BigEndian.Uint16(c.hdr[:2]))
		case 127:
			if _, err := io.ReadFull(c.br, c.hdr[:8]); err != nil {
				return 0, err
			}
			n = int64(binary.BigEndian.Uint64(c.hdr[:8]))
		}
		switch op {
		case websocket.BinaryMessage, websocket.TextMessage, 0:
			c.left = n
		case websocket.CloseMessage:
			return 0, io.EOF
		default: // ping, pong
			if _, err := c.br.Discard(int(n)); err != nil {
				return 0, err
			}
		}
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.br.Read(p)
	c.left -= int64(n)
	return n, err
}

// readFull reads exactly len(p) payload bytes.
func (c *benchClient) readFull(p []byte) error {
	for len(p) > 0 {
		n, err := c.read(p)
		if err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// close ends the session.
func (c *benchClient) close() {
	if c.framed {
		c.conn.Write(maskedFrame(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "")))
	}
	c.conn.Close()
}
