package local

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// readUntil reads from t until want appears or the deadline passes.
func readUntil(tb testing.TB, t *TerminalConn, want string) string {
	tb.Helper()
	var out bytes.Buffer
	buf := make([]byte, 4096)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			tb.Fatalf("terminal output %q; want it to contain %q", out.String(), want)
		}
		t.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := t.Read(buf)
		out.Write(buf[:n])
	}
	return out.String()
}

func TestTerminal_ResizeReachesThePty(t *testing.T) {
	d := &Desktop{spec: DesktopSpec{Name: "t", Home: t.TempDir()}, display: 99}
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()

	term.Write([]byte("stty size; echo END-$((6*7))\r"))
	readUntil(t, term, "24 80")
	readUntil(t, term, "END-42")

	var _ relay.Resizer = term // what the relay's resize messages reach
	if err := term.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	if cols, rows, _ := term.Size(); cols != 132 || rows != 43 {
		t.Errorf("Size() = %dx%d; want 132x43", cols, rows)
	}
	term.Write([]byte("stty size\r"))
	readUntil(t, term, "43 132")

	// Closing hangs up the shell and reaps it.
	term.Close()
	select {
	case <-term.done:
	case <-time.After(5 * time.Second):
		t.Fatal("shell still running after Close")
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func TestTerminal_OpenCloseLeavesNothing(t *testing.T) {
	d := &Desktop{spec: DesktopSpec{Name: "t", Home: t.TempDir()}, display: 99}
	before, goroutines := openFDs(t), runtime.NumGoroutine()
	const cycles = 300
	for i := range cycles {
		term, err := d.StartTerminal()
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half of them with a shell that has started
			term.Write([]byte("echo up\r"))
			readUntil(t, term, "up")
		}
		term.Close()
	}
	// Give the runtime a moment to finish the reapers' exits.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && (openFDs(t) > before || runtime.NumGoroutine() > goroutines) {
		time.Sleep(50 * time.Millisecond)
	}
	if got := openFDs(t); got > before {
		t.Errorf("open fds after %d terminals: %d; want at most %d", cycles, got, before)
	}
	if got := runtime.NumGoroutine(); got > goroutines {
		t.Errorf("goroutines after %d terminals: %d; want at most %d", cycles, got, goroutines)
	}
}
