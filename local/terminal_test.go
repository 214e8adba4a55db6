package local

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/creack/pty"
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
	// One read up to the marker: a second readUntil would miss what the
	// first read past its match when both lines come in one chunk.
	if out := readUntil(t, term, "END-42"); !strings.Contains(out, "24 80") {
		t.Fatalf("stty size before a resize printed %q; want 24 80", out)
	}

	var _ relay.Resizer = term // what the relay's resize messages reach
	if err := term.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	if cols, rows, _ := term.Size(); cols != 132 || rows != 43 {
		t.Errorf("Size() = %dx%d; want 132x43", cols, rows)
	}
	// The shell may write its old size back once as its prompt returns
	// (see sizeKeeper); the size the browser asked for wins within a try
	// or two.
	for try := 1; ; try++ {
		marker := fmt.Sprintf("S-%d", try)
		term.Write([]byte(fmt.Sprintf("stty size; echo S-$((%d))\r", try)))
		if out := readUntil(t, term, marker); strings.Contains(out, "43 132") {
			break
		} else if try == 5 {
			t.Fatalf("stty size after a resize printed %q; want 43 132", out)
		}
	}

	// Closing hangs up the shell and reaps it.
	term.Close()
	select {
	case <-term.done:
	case <-time.After(5 * time.Second):
		t.Fatal("shell still running after Close")
	}
}

// TestTerminal_ResizeSurvivesTheShellsWriteBack forces the race readline
// opens at each prompt: it reads the pty's size and writes it back, and a
// resize in between was lost for good.
func TestTerminal_ResizeSurvivesTheShellsWriteBack(t *testing.T) {
	d := &Desktop{spec: DesktopSpec{Name: "t", Home: t.TempDir()}, display: 99}
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("echo UP-$((1+1))\r"))
	readUntil(t, term, "UP-2")

	if err := term.Resize(132, 43); err != nil {
		t.Fatal(err)
	}
	// What readline does when its read came just before the resize.
	if err := pty.Setsize(term.pty, &pty.Winsize{Cols: 80, Rows: 24}); err != nil {
		t.Fatal(err)
	}
	term.Write([]byte("echo PROMPT-$((2+2))\r"))
	readUntil(t, term, "PROMPT-4")
	if cols, rows, _ := term.Size(); cols != 132 || rows != 43 {
		t.Fatalf("size after the shell wrote its old size back: %dx%d; want 132x43", cols, rows)
	}
	term.Write([]byte("stty size; echo END-$((6*7))\r"))
	if out := readUntil(t, term, "END-42"); !strings.Contains(out, "43 132") {
		t.Fatalf("stty size printed %q; want 43 132", out)
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
