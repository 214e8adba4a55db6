package relay

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// WSConn is a websocket used as a byte stream, the one adapter for every
// websocket the portal dials (peer links, KubeVirt's plain.kubevirt.io
// subresources): each Write is one binary message, Read returns the bytes
// of the binary messages received in order, and a normal close is io.EOF.
// Text messages from the far side are skipped: neither a peer nor KubeVirt
// sends them on a stream. It is no Resizer, so nothing but stream bytes
// ever reaches the far side (a text frame breaks a KubeVirt stream); see
// PeerConn for the link that carries resizes. One goroutine may read while
// others write.
type WSConn struct {
	ws        *websocket.Conn
	dropIsEOF bool
	closeWait time.Duration

	rmu sync.Mutex
	r   io.Reader // the message being read

	wmu sync.Mutex
}

var _ net.Conn = (*WSConn)(nil)

// WSConnOptions tunes a WSConn.
type WSConnOptions struct {
	// DropIsEOF makes a connection dropped without a close frame the
	// stream's end (io.EOF) rather than an error. KubeVirt ends a console
	// another client took over, or that of a VM that stopped, that way.
	DropIsEOF bool

	// CloseWait makes Close wait, this long at most, for the far side to
	// answer its close frame and end the connection, reading and dropping
	// what still comes. A KubeVirt serial console takes one client, and
	// virt-handler lets it go only once it has read the close (after any
	// input the guest has not taken yet): whoever waits for the line
	// (console.Streams) must not be told it is free before.
	CloseWait time.Duration
}

// NewWSConn returns ws as a byte stream.
func NewWSConn(ws *websocket.Conn, o WSConnOptions) *WSConn {
	return &WSConn{ws: ws, dropIsEOF: o.DropIsEOF, closeWait: o.CloseWait}
}

// Read implements net.Conn.
func (c *WSConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.r == nil {
			typ, r, err := c.ws.NextReader()
			if err != nil {
				if c.isEnd(err) {
					return 0, io.EOF
				}
				return 0, err
			}
			if typ != websocket.BinaryMessage {
				continue
			}
			c.r = r
		}
		n, err := c.r.Read(p)
		if errors.Is(err, io.EOF) {
			c.r = nil
			if n == 0 {
				continue
			}
			err = nil
		}
		return n, err
	}
}

// isEnd reports whether err from the websocket is the stream's clean end.
func (c *WSConn) isEnd(err error) bool {
	if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway) {
		return true
	}
	return c.dropIsEOF && websocket.IsCloseError(err, websocket.CloseAbnormalClosure)
}

// Write implements net.Conn.
func (c *WSConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeText sends one text message, in turn with Write.
func (c *WSConn) writeText(b []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.ws.WriteMessage(websocket.TextMessage, b)
}

// Close implements net.Conn: it sends a normal close frame and closes;
// with CloseWait, once the far side answered the close and ended the
// connection, or CloseWait passed.
func (c *WSConn) Close() error {
	wait := time.Second
	if c.closeWait > 0 {
		wait = c.closeWait
	}
	end := time.Now().Add(wait)
	err := c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), end)
	if c.closeWait > 0 && err == nil {
		c.awaitEnd(end)
	}
	return c.ws.Close()
}

// awaitEnd reads until the far side's close frame and the end of the
// connection, or until end: a reader in Read meanwhile (whose Read the
// deadline ends at the latest) reads on until it returns.
func (c *WSConn) awaitEnd(end time.Time) {
	c.ws.SetReadDeadline(end)
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if _, _, err := c.ws.NextReader(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				return // ended, or the deadline passed
			}
			break
		}
	}
	// The close answered: the far side ends the connection next. What
	// websocket has buffered of it does not matter: only its end does.
	nc := c.ws.NetConn()
	nc.SetReadDeadline(end)
	buf := make([]byte, 512)
	for {
		if _, err := nc.Read(buf); err != nil {
			return
		}
	}
}

// LocalAddr implements net.Conn.
func (c *WSConn) LocalAddr() net.Addr { return c.ws.LocalAddr() }

// RemoteAddr implements net.Conn.
func (c *WSConn) RemoteAddr() net.Addr { return c.ws.RemoteAddr() }

// SetDeadline implements net.Conn.
func (c *WSConn) SetDeadline(t time.Time) error {
	c.ws.SetReadDeadline(t)
	return c.ws.SetWriteDeadline(t)
}

// SetReadDeadline implements net.Conn.
func (c *WSConn) SetReadDeadline(t time.Time) error { return c.ws.SetReadDeadline(t) }

// SetWriteDeadline implements net.Conn.
func (c *WSConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
