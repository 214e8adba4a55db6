package console_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// BenchmarkScreens_KeyToPixels: a holder's key press to the changed
// pixels it causes (an xterm's echo on a real desktop), from a holder's
// client on the screen's owner and from one on another replica, relayed
// over a screen link on loopback. The two take turns key by key, so that
// their ratio shares the machine's load of the moment. Reported: each
// one's median and p95, and relayed/owner of the medians.
//
// Nothing is timed until the desktop is ready: each client has its first
// whole screen, and a key typed has shown on it (until the xterm is up,
// keys change nothing and no update would come).
func BenchmarkScreens_KeyToPixels(b *testing.B) {
	dial, _ := startDesktop(b)
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	owner, other := startReplica(b, table, "a", dial), startReplica(b, table, "b", dial)
	ref := vdi.Ref{Namespace: "ns", Name: "bench"}
	ctx := context.Background()
	onOwner, path, err := owner.screens.Join(ctx, ref, true, dial) // makes a the owner
	if err != nil || path != "direct" {
		b.Fatalf("the holder on a: %v by %q; want a to own the screen (direct)", err, path)
	}
	defer onOwner.Close()
	relayed, path, err := other.screens.Join(ctx, ref, true, dial)
	if err != nil || path != console.PathPeer {
		b.Fatalf("the holder on b: %v by %q; want a screen link (%q)", err, path, console.PathPeer)
	}
	defer relayed.Close()
	clients := []*keyClient{newKeyClient(b, onOwner), newKeyClient(b, relayed)}
	for _, c := range clients {
		c.ready(b)
	}
	took := make([][]time.Duration, len(clients))
	sym := func(i int) uint32 { // x, then BackSpace: the line never empties
		if i%2 == 0 {
			return 'x'
		}
		return 0xff08
	}
	b.ResetTimer()
	for i := range b.N {
		for k, c := range clients {
			b.StopTimer()
			c.settle(b, 50*time.Millisecond) // the other's echo, not this key's
			b.StartTimer()
			took[k] = append(took[k], c.key(b, sym(i)))
		}
	}
	b.StopTimer()
	med := make([]float64, len(clients))
	for k, name := range []string{"owner", "relayed"} {
		slices.Sort(took[k])
		med[k] = float64(took[k][len(took[k])/2].Microseconds())
		b.ReportMetric(med[k], name+"-median-us")
		b.ReportMetric(float64(took[k][len(took[k])*95/100].Microseconds()), name+"-p95-us")
	}
	b.ReportMetric(med[1]/max(med[0], 1), "relayed/owner")
}

// keyUpdateWait bounds the wait for a key's echo on a loaded machine:
// a key that never shows fails the benchmark instead of hanging it.
const keyUpdateWait = 30 * time.Second

// keyClient is a holder's VNC client (Raw) that times a key press to
// the framebuffer update that follows it. A goroutine reads the server's
// updates, so that a wait can end.
type keyClient struct {
	conn    net.Conn
	req     []byte // an incremental request for the whole screen
	updates chan error
}

func newKeyClient(tb testing.TB, conn net.Conn) *keyClient {
	tb.Helper()
	c := &keyClient{conn: conn, updates: make(chan error, 64)}
	r := bufio.NewReader(conn)
	read := func(n int) []byte {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			tb.Fatalf("RFB handshake: %v", err)
		}
		return b
	}
	conn.SetReadDeadline(time.Now().Add(keyUpdateWait))
	read(12)
	conn.Write([]byte("RFB 003.008\n"))
	read(int(read(1)[0]))
	conn.Write([]byte{1}) // None
	read(4)
	conn.Write([]byte{1}) // shared
	init := read(24)
	read(int(binary.BigEndian.Uint32(init[20:])))
	conn.SetReadDeadline(time.Time{})
	conn.Write([]byte{2, 0, 0, 1, 0, 0, 0, 0}) // Raw only
	c.req = []byte{3, 1, 0, 0, 0, 0, init[0], init[1], init[2], init[3]}
	go c.readUpdates(r)
	conn.Write([]byte{3, 0, 0, 0, 0, 0, init[0], init[1], init[2], init[3]})
	c.next(tb, keyUpdateWait) // the whole screen
	return c
}

// readUpdates sends each framebuffer update with a rectangle (nil) or
// the read's error to c.updates, until the connection ends.
func (c *keyClient) readUpdates(r *bufio.Reader) {
	fail := func(err error) { c.updates <- err }
	for {
		var hdr [4]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			fail(err)
			return
		}
		if hdr[0] != 0 {
			fail(fmt.Errorf("server message %d; want updates only", hdr[0]))
			return
		}
		n := int(binary.BigEndian.Uint16(hdr[2:]))
		for range n {
			var rect [12]byte
			if _, err := io.ReadFull(r, rect[:]); err != nil {
				fail(err)
				return
			}
			w, h := int(binary.BigEndian.Uint16(rect[4:])), int(binary.BigEndian.Uint16(rect[6:]))
			if _, err := r.Discard(w * h * 4); err != nil {
				fail(err)
				return
			}
		}
		if n > 0 {
			c.updates <- nil
		} else {
			c.conn.Write(c.req) // nothing changed yet: ask again
		}
	}
}

// next waits up to wait for the next update; it reports whether one came.
func (c *keyClient) next(tb testing.TB, wait time.Duration) bool {
	tb.Helper()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case err := <-c.updates:
		if err != nil {
			tb.Fatalf("RFB read: %v", err)
		}
		return true
	case <-t.C:
		return false
	}
}

// press presses and releases sym and asks for what changes.
func (c *keyClient) press(sym uint32) {
	c.conn.Write(c.req)
	for _, down := range []byte{1, 0} {
		k := []byte{4, down, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(k[4:], sym)
		c.conn.Write(k)
	}
}

// ready types x until one shows (the xterm is up and has the focus),
// then waits for a quiet screen.
func (c *keyClient) ready(tb testing.TB) {
	tb.Helper()
	for end := time.Now().Add(keyUpdateWait); ; {
		c.press('x')
		if c.next(tb, time.Second) {
			break
		}
		if time.Now().After(end) {
			tb.Fatal("typed x for 30 s and the screen never changed: is the desktop's terminal up?")
		}
	}
	c.settle(tb, time.Second)
}

// settle waits for quiet long with no update: an echo may come as more
// than one update, and the next key must not take an earlier one's.
func (c *keyClient) settle(tb testing.TB, quiet time.Duration) {
	tb.Helper()
	for {
		c.conn.Write(c.req)
		if !c.next(tb, quiet) {
			return
		}
	}
}

// key presses sym and returns how long its echo took to show.
func (c *keyClient) key(tb testing.TB, sym uint32) time.Duration {
	tb.Helper()
	start := time.Now()
	c.press(sym)
	if !c.next(tb, keyUpdateWait) {
		tb.Fatalf("key %#x: no change on the screen in %v", sym, keyUpdateWait)
	}
	return time.Since(start)
}
