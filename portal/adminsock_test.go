package portal

import (
	"errors"
	"flag"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/api"
)

// TestCLI_PortalNotRunning checks the message when nothing serves the
// socket: no socket file, and a socket file nobody listens on.
func TestCLI_PortalNotRunning(t *testing.T) {
	data := t.TempDir()
	getenv := func(name string) string {
		if name == "CORRAL_VDI_DATA_DIR" {
			return data
		}
		return ""
	}
	check := func(t *testing.T) {
		_, err := runCLITest(t, getenv, "pools")
		if err == nil {
			t.Fatal("pools with no portal: no error")
		}
		for _, want := range []string{"not running", "make run", "corral-vdi-portal serve", data} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not mention %q", err, want)
			}
		}
	}
	t.Run("NoSocket", check)
	t.Run("StaleSocket", func(t *testing.T) {
		mustStaleSocket(t, filepath.Join(data, api.AdminSocketName))
		check(t)
	})
	t.Run("SocketOff", func(t *testing.T) {
		off := func(name string) string {
			if name == "CORRAL_VDI_ADMIN_SOCKET" {
				return "off"
			}
			return getenv(name)
		}
		if _, err := runCLITest(t, off, "desktops"); err == nil || !strings.Contains(err.Error(), "CORRAL_VDI_ADMIN_SOCKET is off") {
			t.Fatalf("desktops with the socket off: %v", err)
		}
	})
	t.Run("Help", func(t *testing.T) {
		if _, err := runCLITest(t, getenv, "release", "-h"); !errors.Is(err, flag.ErrHelp) {
			t.Fatalf("release -h: %v; want flag.ErrHelp", err)
		}
	})
}

// mustStaleSocket leaves a socket file at path that nothing listens on, as
// a portal that was killed does.
func mustStaleSocket(tb testing.TB, path string) {
	tb.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
}

// TestRemoveStaleSocket checks what the portal does with a file in the
// admin socket's place at start.
func TestRemoveStaleSocket(t *testing.T) {
	dir := t.TempDir()
	t.Run("Stale", func(t *testing.T) {
		path := filepath.Join(dir, "stale.sock")
		mustStaleSocket(t, path)
		if live, err := removeStaleSocket(path); live || err != nil {
			t.Fatalf("removeStaleSocket = %v, %v; want false, nil", live, err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("stale socket still there: %v", err)
		}
	})
	t.Run("Live", func(t *testing.T) {
		path := filepath.Join(dir, "live.sock")
		ln, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		if live, err := removeStaleSocket(path); !live || err != nil {
			t.Fatalf("removeStaleSocket = %v, %v; want true, nil", live, err)
		}
		// A second portal on the same data directory serves no socket
		// and leaves the first one's alone.
		a, err := openAdminSocket(path, http.NotFoundHandler(), slog.New(slog.DiscardHandler))
		if a != nil || err != nil {
			t.Fatalf("openAdminSocket next to a live one = %v, %v; want nil, nil", a, err)
		}
		if c, err := net.Dial("unix", path); err != nil {
			t.Fatalf("the live socket is gone: %v", err)
		} else {
			c.Close()
		}
	})
	t.Run("NotASocket", func(t *testing.T) {
		path := filepath.Join(dir, "file")
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := removeStaleSocket(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("regular file: %v; want not a socket", err)
		}
	})
	t.Run("TooLong", func(t *testing.T) {
		long := filepath.Join(dir, strings.Repeat("x", maxSocketPath))
		if _, err := openAdminSocket(long, http.NotFoundHandler(), slog.Default()); err == nil || !strings.Contains(err.Error(), "CORRAL_VDI_ADMIN_SOCKET") {
			t.Fatalf("long path: %v", err)
		}
	})
}
