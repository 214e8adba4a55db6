package rfb

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// scriptedDialer dials a new scripted desktop each time, after delay,
// failing the first fails dials; it counts the dials.
func scriptedDialer(t *testing.T, delay time.Duration, fails int32) (Dialer, *atomic.Int32) {
	var n atomic.Int32
	return func(context.Context) (net.Conn, string, error) {
		i := n.Add(1)
		time.Sleep(delay)
		if i <= fails {
			return nil, "", errors.New("the desktop is not listening yet")
		}
		d := newScriptedDesktop(t, 64, 32)
		d.fill = [3]byte{1, 2, 3}
		return d.peer, "direct", nil
	}, &n
}

// waitHub waits until key's hub runs (or, with want false, has gone).
func waitHub(t *testing.T, hs *Hubs, key string, want bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if _, ok := hs.Hub(key); ok == want {
			return
		}
	}
	t.Fatalf("hub %s running: not %v within 10s", key, want)
}

// TestHubs_WarmThenJoin: a warmed hub serves the client that comes next
// with no dial of its own, then lets go after its hold.
func TestHubs_WarmThenJoin(t *testing.T) {
	dial, dials := scriptedDialer(t, 0, 0)
	var hs Hubs
	hs.Warm("k", 200*time.Millisecond, dial)
	waitHub(t, &hs, "k", true)
	conn, path, err := hs.Join(context.Background(), "k", true, dial)
	must(t, err)
	c := dialTestClient(t, conn, encZRLE)
	c.request(false)
	must(t, c.next())
	if got := c.pixel(0, 0); got != [3]byte{1, 2, 3} || path != "direct" {
		t.Errorf("the client's screen has %v at 0,0 by %q; want the desktop's {1 2 3} by direct", got, path)
	}
	if n := dials.Load(); n != 1 {
		t.Errorf("%d dials; want the warm one only", n)
	}
	time.Sleep(300 * time.Millisecond) // the hold is over: the client keeps it
	if _, ok := hs.Hub("k"); !ok {
		t.Fatal("the hub closed under its client when the warm hold ended")
	}
	conn.Close()
	waitHub(t, &hs, "k", false)
}

// TestHubs_WarmUnused: a warmed hub nobody joins closes after its hold.
func TestHubs_WarmUnused(t *testing.T) {
	dial, _ := scriptedDialer(t, 0, 0)
	var hs Hubs
	hs.Warm("k", 100*time.Millisecond, dial)
	waitHub(t, &hs, "k", true)
	waitHub(t, &hs, "k", false)
}

// TestHubs_JoinRetriesAFailedWarm: a client that waited on a warm dial
// that failed (the desktop not listening yet) dials again itself.
func TestHubs_JoinRetriesAFailedWarm(t *testing.T) {
	dial, dials := scriptedDialer(t, 100*time.Millisecond, 1)
	var hs Hubs
	hs.Warm("k", time.Hour, dial)
	conn, _, err := hs.Join(context.Background(), "k", true, dial)
	must(t, err)
	defer conn.Close()
	dialTestClient(t, conn, encZRLE)
	if n := dials.Load(); n != 2 {
		t.Errorf("%d dials; want the failed warm one and the client's", n)
	}
}
