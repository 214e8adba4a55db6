package connid

import (
	"net"
	"testing"
)

// TestOnClose: the hook runs once however often the connection is
// closed, and the wrapper unwraps to the connection it wraps.
func TestOnClose(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	runs := 0
	c := OnClose(a, func() { runs++ })
	c.Close()
	c.Close()
	if runs != 1 {
		t.Errorf("the hook ran %d times for two closes; want once", runs)
	}
	if u, ok := c.(interface{ Unwrap() net.Conn }); !ok || u.Unwrap() != a {
		t.Error("OnClose's connection does not unwrap to the one it wraps")
	}
}
