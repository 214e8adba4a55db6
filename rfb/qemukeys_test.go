package rfb

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"
)

// serveTestClient serves a test client asking for encs on hub.
func serveTestClient(t *testing.T, hub *Hub, control bool, encs ...int32) *testClient {
	t.Helper()
	a, b := net.Pipe()
	go hub.Serve(context.Background(), a, control)
	t.Cleanup(func() { b.Close() })
	return dialTestClient(t, b, encs...)
}

// nextInput waits for the desktop's next input message; *n counts those
// taken.
func (d *scriptedDesktop) nextInput(t *testing.T, n *int) []byte {
	t.Helper()
	select {
	case <-d.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the desktop got no more input in 10 s")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	*n++
	return d.input[*n-1]
}

// TestHub_QEMUKeys: a desktop that takes QEMU's extended key events (QEMU)
// gets them whole from a client with control, which the hub told; a
// client without control gets nothing through; a desktop that never
// offered them (Xvnc) gets a KeyEvent of the keysym; a subtype the hub
// never offered (QEMU's audio) ends that client's connection only.
func TestHub_QEMUKeys(t *testing.T) {
	zKey := []byte{msgQEMU, qemuKeyEvent, 0, 1, 0, 0, 0, 'z', 0, 0, 0, 0x15} // z typed on the US Y key
	marker := []byte{msgPointerEvent, 0, 0, 1, 0, 1}

	t.Run("QEMU", func(t *testing.T) {
		d, n := newScriptedDesktop(t, 64, 32), 0
		d.qemuKeys = true
		hub, err := Connect(d.peer)
		must(t, err)
		defer hub.Close()
		viewer := serveTestClient(t, hub, false, encZRLE, encQEMUKeyEvent)
		holder := serveTestClient(t, hub, true, encZRLE, encQEMUKeyEvent)
		plain := serveTestClient(t, hub, true, encZRLE)
		for _, c := range []*testClient{viewer, holder, plain} {
			for c.request(false); c.rects[encZRLE] == 0; {
				must(t, c.next())
			}
		}
		for deadline := time.Now().Add(10 * time.Second); holder.rects[encQEMUKeyEvent] == 0 && time.Now().Before(deadline); {
			holder.request(true)
			must(t, holder.next())
		}
		if holder.rects[encQEMUKeyEvent] == 0 || plain.rects[encQEMUKeyEvent] != 0 {
			t.Fatalf("QEMU key acks: %d to the client that asked, %d to one that did not; want 1+, 0",
				holder.rects[encQEMUKeyEvent], plain.rects[encQEMUKeyEvent])
		}
		viewer.conn.Write(zKey)
		viewer.conn.Write(marker)
		holder.conn.Write(marker) // after the viewer's: the viewer's was read and dropped if it arrives first
		if got := d.nextInput(t, &n); !bytes.Equal(got, marker) {
			t.Fatalf("the desktop got %v from a client without control; want nothing", got)
		}
		holder.conn.Write(zKey)
		if got := d.nextInput(t, &n); !bytes.Equal(got, zKey) {
			t.Errorf("the desktop got %v; want the extended key %v whole", got, zKey)
		}
	})

	t.Run("Xvnc", func(t *testing.T) {
		d, n := newScriptedDesktop(t, 64, 32), 0
		hub, err := Connect(d.peer)
		must(t, err)
		defer hub.Close()
		holder := serveTestClient(t, hub, true, encZRLE, encQEMUKeyEvent)
		holder.conn.Write(zKey)
		if got, want := d.nextInput(t, &n), []byte{msgKeyEvent, 1, 0, 0, 0, 0, 0, 'z'}; !bytes.Equal(got, want) {
			t.Errorf("the desktop got %v; want the KeyEvent %v", got, want)
		}
		holder.conn.Write([]byte{msgQEMU, qemuKeyEvent, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0x15}) // a scan code alone
		holder.conn.Write(marker)
		if got := d.nextInput(t, &n); !bytes.Equal(got, marker) {
			t.Errorf("the desktop got %v for a scan code with no keysym; want nothing", got)
		}

		other := serveTestClient(t, hub, true, encZRLE)
		holder.conn.Write([]byte{msgQEMU, 1, 0, 0}) // audio: enable
		holder.conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, holder.conn); err != nil {
			t.Errorf("the client that sent QEMU audio was not closed: %v", err)
		}
		other.conn.Write(marker)
		if got := d.nextInput(t, &n); !bytes.Equal(got, marker) {
			t.Errorf("another client's input after it: %v; want %v", got, marker)
		}
	})
}
