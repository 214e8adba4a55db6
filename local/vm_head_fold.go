package local

import (
	"net"
	"sync"
	"time"
)

// foldWait bounds each step of a head's fold (headConn.Close): a guest
// whose QEMU has stopped reading is not waited on.
const foldWait = time.Second

// foldMessage is an RFB SetDesktopSize asking for a head of no size: one
// screen, 0x0. QEMU's VNC server passes the size to the display
// (ui/vnc.c, dpy_set_ui_info) and virtio-gpu disables an output asked for
// no width or height (hw/display/virtio-gpu-base.c, virtio_gpu_ui_info),
// so the guest sees that monitor disconnected; a later size turns it on
// again.
var foldMessage = []byte{251, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}

// headConn is a connection to the VNC server of a further head of a VM's
// display (DialHead), whose screen hub closes it when the head's last
// client has gone (its screen window closed). Closing it folds the head
// away first: QEMU itself tells the guest nothing when a VNC client
// leaves, so the monitor would stay on at its last size. The fold never
// lands inside another message: it is left out while a write is under
// way (QEMU not reading).
type headConn struct {
	closeWriter
	mu   sync.Mutex // held by a write
	fold sync.Once
	end  sync.Once
	gone chan struct{} // closed once a read met the stream's end
}

// closeWriter is a stream that closes its sending half alone (a Unix or
// TCP socket).
type closeWriter interface {
	net.Conn
	CloseWrite() error
}

func newHeadConn(c closeWriter) *headConn {
	return &headConn{closeWriter: c, gone: make(chan struct{})}
}

// Read implements net.Conn.
func (c *headConn) Read(p []byte) (int, error) {
	n, err := c.closeWriter.Read(p)
	if err != nil {
		c.end.Do(func() { close(c.gone) })
	}
	return n, err
}

// Write implements net.Conn.
func (c *headConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closeWriter.Write(p)
}

// Close asks QEMU to fold the head away, then closes the connection. It
// closes the sending half after the fold and waits for QEMU to hang up
// (the hub's reader sees it): QEMU drops a client whose socket reports a
// hang-up without reading what it had sent, so a plain close right after
// the fold lost it now and then.
func (c *headConn) Close() error {
	if c.mu.TryLock() {
		c.fold.Do(func() {
			c.SetWriteDeadline(time.Now().Add(foldWait))
			if _, err := c.closeWriter.Write(foldMessage); err != nil || c.CloseWrite() != nil {
				return // a QEMU gone has no head to fold
			}
			select {
			case <-c.gone:
			case <-time.After(foldWait):
			}
		})
		c.mu.Unlock()
	}
	return c.closeWriter.Close()
}
