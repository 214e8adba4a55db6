package connid

import (
	"net"
	"sync"
)

// OnClose returns c wrapped to run f once, when it is first closed. The
// wrapper unwraps to c, so VerdictOf looks through it.
func OnClose(c net.Conn, f func()) net.Conn {
	return &closeHook{Conn: c, hook: f}
}

// closeHook is a connection that runs hook once when first closed.
type closeHook struct {
	net.Conn
	once sync.Once
	hook func()
}

// Close implements net.Conn.
func (c *closeHook) Close() error {
	c.once.Do(c.hook)
	return c.Conn.Close()
}

// Unwrap returns the connection c wraps.
func (c *closeHook) Unwrap() net.Conn { return c.Conn }
