package connid

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestMain doubles as a client process the tests start as other uids:
// with CONNID_DIAL=network,address it connects there, says "ok" on
// stdout and holds the connection until its stdin closes.
func TestMain(m *testing.M) {
	if spec := os.Getenv("CONNID_DIAL"); spec != "" {
		network, addr, _ := cut(spec)
		c, err := net.DialTimeout(network, addr, 5*time.Second)
		if err != nil {
			os.Stdout.WriteString("dial: " + err.Error() + "\n")
			os.Exit(1)
		}
		os.Stdout.WriteString("ok\n")
		bufio.NewReader(os.Stdin).ReadString('\n')
		c.Close()
		os.Exit(0)
	}
	code := m.Run()
	if helperDir != "" {
		os.RemoveAll(helperDir)
	}
	os.Exit(code)
}

// helperDir holds a copy of the test binary that other uids may run (the
// go tool's build folder is root's alone).
var helperDir string

func helperBinary(t *testing.T) string {
	t.Helper()
	if helperDir == "" {
		dir, err := os.MkdirTemp("", "connid-helper")
		if err != nil {
			t.Fatal(err)
		}
		helperDir = dir
		os.Chmod(dir, 0o755)
		b, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "client"), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(helperDir, "client")
}

func cut(s string) (string, string, bool) {
	for i := range s {
		if s[i] == ',' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// dialAs connects to addr over network from a process running as uid,
// and keeps the connection open until the test ends.
func dialAs(t *testing.T, uid int, network, addr string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as another uid")
	}
	cmd := exec.Command(helperBinary(t))
	cmd.Env = append(os.Environ(), "CONNID_DIAL="+network+","+addr)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Wait() })
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	if line != "ok\n" {
		t.Fatalf("client as uid %d: %q", uid, line)
	}
}

// mustAccept accepts one connection of ln within 10 s.
func mustAccept(t *testing.T, ln net.Listener) net.Conn {
	t.Helper()
	type deadliner interface{ SetDeadline(time.Time) error }
	ln.(deadliner).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func mustListen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// desktopRange is the uids the tests' Classifier takes for desktops'.
func desktopRange(uid int) bool { return uid >= 201400 && uid <= 201499 }
