package local

import (
	"bytes"
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

	if err := term.Resize(relay.Resize{Cols: 132, Rows: 43}); err != nil {
		t.Fatal(err)
	}
	if got, _ := term.Size(); got != (relay.Resize{Cols: 132, Rows: 43}) {
		t.Errorf("Size() = %v; want 132x43", got)
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
