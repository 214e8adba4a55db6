package kube

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// wsConn is a websocket as a net.Conn of binary messages, as KubeVirt's
// plain.kubevirt.io streams are: each Write is one binary message, Read
// drains messages in order. Text messages are refused: KubeVirt never sends
// them, and sending one to it breaks the stream.
type wsConn struct {
	ws *websocket.Conn

	rmu sync.Mutex
	r   io.Reader // the message being read

	wmu sync.Mutex
}

var _ net.Conn = (*wsConn)(nil)

func (c *wsConn) Read(p []byte) (int, error) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	for {
		if c.r != nil {
			n, err := c.r.Read(p)
			if err == io.EOF {
				c.r = nil
				if n > 0 {
					return n, nil
				}
				continue
			}
			return n, err
		}
		typ, r, err := c.ws.NextReader()
		if err != nil {
			// KubeVirt ends a console another client took over, or that of
			// a VM that stopped, by closing the connection without a close
			// frame: that too is the stream's end, not a failure.
			if websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseAbnormalClosure) {
				return 0, io.EOF
			}
			return 0, err
		}
		if typ != websocket.BinaryMessage {
			continue
		}
		c.r = r
	}
}

func (c *wsConn) Write(p []byte) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := c.ws.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (c *wsConn) Close() error {
	c.wmu.Lock()
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	c.wmu.Unlock()
	return c.ws.Close()
}

func (c *wsConn) LocalAddr() net.Addr                { return c.ws.LocalAddr() }
func (c *wsConn) RemoteAddr() net.Addr               { return c.ws.RemoteAddr() }
func (c *wsConn) SetDeadline(t time.Time) error      { return c.ws.NetConn().SetDeadline(t) }
func (c *wsConn) SetReadDeadline(t time.Time) error  { return c.ws.SetReadDeadline(t) }
func (c *wsConn) SetWriteDeadline(t time.Time) error { return c.ws.SetWriteDeadline(t) }
