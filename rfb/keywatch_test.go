package rfb

import (
	"context"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// watchedConn is a desktop connection that records the key events its
// BeforeKey sees and holds the first until release is closed.
type watchedConn struct {
	net.Conn
	release chan struct{}

	mu   sync.Mutex
	seen []string
}

func (w *watchedConn) BeforeKey(keysym uint32, down bool) {
	w.mu.Lock()
	first := len(w.seen) == 0
	w.seen = append(w.seen, string(rune(keysym))+map[bool]string{true: "↓", false: "↑"}[down])
	w.mu.Unlock()
	if first {
		<-w.release
	}
}

// TestHub_KeyWatcherSeesKeysFirst: a desktop connection that watches keys
// sees each key event (not pointer events) in order before the desktop
// gets it, and may hold it back: the desktop gets nothing while it does.
func TestHub_KeyWatcherSeesKeysFirst(t *testing.T) {
	d := newScriptedDesktop(t, 64, 32)
	w := &watchedConn{Conn: d.peer, release: make(chan struct{})}
	hub, err := Connect(w)
	must(t, err)
	defer hub.Close()
	a, b := net.Pipe()
	go hub.Serve(context.Background(), a, true)
	t.Cleanup(func() { b.Close() })
	holder := dialTestClient(t, b, encZRLE)
	inputs := [][]byte{
		{msgKeyEvent, 1, 0, 0, 0, 0, 0, 'a'},
		{msgPointerEvent, 1, 0, 10, 0, 10},
		{msgKeyEvent, 0, 0, 0, 0, 0, 0, 'a'},
	}
	go func() {
		for _, m := range inputs {
			holder.conn.Write(m)
		}
	}()
	shown := func() int { w.mu.Lock(); defer w.mu.Unlock(); return len(w.seen) }
	for end := time.Now().Add(10 * time.Second); shown() == 0 && time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
	}
	if shown() == 0 {
		t.Fatal("the watcher saw no key in 10s")
	}
	if got := d.inputs(); len(got) != 0 {
		t.Fatalf("the desktop got %q while the watcher held the first key", got)
	}
	close(w.release)
	for range inputs {
		select {
		case <-d.got:
		case <-time.After(10 * time.Second):
			t.Fatalf("the desktop got %d of %d input messages", len(d.inputs()), len(inputs))
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if want := []string{"a↓", "a↑"}; !slices.Equal(w.seen, want) {
		t.Errorf("the watcher saw %q; want %q", w.seen, want)
	}
}
