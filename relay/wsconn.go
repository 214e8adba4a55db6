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
}

// NewWSConn returns ws as a byte stream.
func NewWSConn(ws *websocket.Conn, o WSConnOptions) *WSConn {
	return &WSConn{ws: ws, dropIsEOF: o.DropIsEOF}
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

// Close implements net.Conn: it sends a normal close frame and closes.
func (c *WSConn) Close() error {
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return c.ws.Close()
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
