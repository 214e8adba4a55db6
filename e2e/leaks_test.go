package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// fds counts the portal process's open file descriptors.
func (p *Portal) fds(t *testing.T) int {
	t.Helper()
	return len(p.fdTargets(t))
}

// fdTargets lists what the portal process's file descriptors point at.
func (p *Portal) fdTargets(t *testing.T) []string {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("portal's fds: %v", err)
	}
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink(filepath.Join(dir, e.Name()))
		out = append(out, e.Name()+" -> "+target)
	}
	return out
}

// cycleConsoles opens and closes console websocket path n times, each time
// reading the console's first bytes (after sending hello, if any), and
// checks that the portal holds no more file descriptors than before. The
// count starts after a few warm-up cycles: pools (database connections)
// grow once, a leak grows with every cycle.
func cycleConsoles(t *testing.T, p *Portal, user, path, hello string, n int) {
	t.Helper()
	const warmup = 10
	var before, beforeG int
	var beforeFDs []string
	start := time.Now()
	for i := range n + warmup {
		if i == warmup {
			eventually(2*time.Second, func() bool { return false }) // let the warm-up's closes land
			before = p.fds(t)
			beforeFDs = p.fdTargets(t)
			beforeG = p.goroutines(t)
		}
		ws, res, err := dialWS(p, user, path, p.URL)
		// The per-user console cap counts a console until the portal has
		// torn it down, a moment after the client's close: wait 100 ms and
		// dial again, up to 2 s, rather than fail on the cap (a leak still
		// shows in the fds and goroutines counted below).
		for try := 0; err != nil && res != nil && res.StatusCode == http.StatusTooManyRequests && try < 20; try++ {
			time.Sleep(100 * time.Millisecond)
			ws, res, err = dialWS(p, user, path, p.URL)
		}
		if err != nil {
			t.Fatalf("cycle %d of %s: %v %v", i, path, status(res), err)
		}
		if hello != "" {
			ws.WriteMessage(websocket.TextMessage, []byte(hello))
		}
		ws.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, _, err := ws.ReadMessage(); err != nil {
			t.Fatalf("cycle %d of %s: read: %v", i, path, err)
		}
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		ws.Close()
	}
	// A leak grows with n; allow a few for pools that grew under load (the
	// database's connections, each a file and its WAL).
	const slack = 4
	var after int
	eventually(5*time.Second, func() bool { after = p.fds(t); return after <= before })
	if after > before+slack {
		t.Errorf("portal fds after %d %s consoles: %d; before: %d\nbefore: %q\nafter: %q", n, path, after, before, beforeFDs, p.fdTargets(t))
	}
	var afterG int
	eventually(5*time.Second, func() bool { afterG = p.goroutines(t); return afterG <= beforeG })
	if afterG > beforeG+slack {
		t.Errorf("portal goroutines after %d %s consoles: %d; before: %d", n, path, afterG, beforeG)
	}
	t.Logf("%d open/close cycles of %s in %v; portal fds %d -> %d, goroutines %d -> %d",
		n, path, time.Since(start).Round(time.Millisecond), before, after, beforeG, afterG)
}
