package local

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestDesktop_Xauthority(t *testing.T) {
	path := filepath.Join(t.TempDir(), "Xauthority")
	if err := writeXauthority(filepath.Dir(path), "Xauthority", nil); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// family, empty address, empty display, name, 16-byte cookie.
	if got, want := len(b), 2+2+2+2+18+2+16; got != want {
		t.Fatalf("len = %d; want %d", got, want)
	}
	if fam := binary.BigEndian.Uint16(b); fam != 0xFFFF {
		t.Errorf("family = %#x; want 0xffff", fam)
	}
	if name := string(b[8:26]); name != "MIT-MAGIC-COOKIE-1" {
		t.Errorf("auth name = %q", name)
	}
	if xauth, err := exec.LookPath("xauth"); err == nil {
		out, err := exec.Command(xauth, "-f", path, "list").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "MIT-MAGIC-COOKIE-1") {
			t.Errorf("xauth list: %v: %s", err, out)
		}
	}
}

func TestDesktop_ReadProcStat(t *testing.T) {
	start, state, err := readProcStat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if start == 0 || (state != 'R' && state != 'S') {
		t.Errorf("readProcStat(self) = %d, %c; want a start time and R or S", start, state)
	}
	p := &desktopProc{Name: "self", PID: os.Getpid(), Start: start + 1}
	if p.alive() {
		t.Error("alive() with a wrong start time = true; want false (recycled PID)")
	}
}

func TestDesktop_LastLogLine(t *testing.T) {
	for _, tt := range []struct{ log, want string }{
		{"", ""},
		{"one\ntwo\n", "two"},
		{"x\n(EE) \nFatal server error:\n(EE) Couldn't add screen\n(EE) \n", "(EE) Couldn't add screen"},
	} {
		path := filepath.Join(t.TempDir(), "x.log")
		if err := os.WriteFile(path, []byte(tt.log), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := lastLogLine(path); got != tt.want {
			t.Errorf("lastLogLine(%q) = %q; want %q", tt.log, got, tt.want)
		}
	}
}
