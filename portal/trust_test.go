package portal

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseConfig_TrustSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		auth []string
	}{
		{"loopback keeps dev", map[string]string{}, []string{"tailscale", "dev"}},
		{"all addresses drop dev", map[string]string{"CORRAL_VDI_LISTEN": "0.0.0.0:8080"}, []string{"tailscale"}},
		{"explicit dev is kept", map[string]string{"CORRAL_VDI_LISTEN": "0.0.0.0:8080", "CORRAL_VDI_AUTH": "tailscale,dev"}, []string{"tailscale", "dev"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.env["CORRAL_VDI_BACKEND"] = "local"
			c, err := ParseConfig(nil, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Auth, tc.auth) {
				t.Errorf("Auth = %v; want %v", c.Auth, tc.auth)
			}
			if c.MaxConsolesPerUser != 10 {
				t.Errorf("MaxConsolesPerUser = %d; want 10", c.MaxConsolesPerUser)
			}
		})
	}
	env := map[string]string{"CORRAL_VDI_BACKEND": "local", "CORRAL_VDI_PUBLIC_URL": "https://vdi.example.com/x, http://b.example:8080",
		"CORRAL_VDI_MAX_CONSOLES_PER_USER": "0", "CORRAL_VDI_METRICS_TOKEN": " tok \n"}
	c, err := ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://vdi.example.com", "http://b.example:8080"}; !slices.Equal(c.PublicURLs, want) {
		t.Errorf("PublicURLs = %v; want %v", c.PublicURLs, want)
	}
	if c.MaxConsolesPerUser != -1 || c.MetricsToken != "tok" {
		t.Errorf("MaxConsolesPerUser %d, MetricsToken %q; want -1 (no cap), tok", c.MaxConsolesPerUser, c.MetricsToken)
	}
	env["CORRAL_VDI_PUBLIC_URL"] = "vdi.example.com"
	if _, err := ParseConfig(nil, func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "CORRAL_VDI_PUBLIC_URL") {
		t.Errorf("PUBLIC_URL without a scheme: %v; want an error naming it", err)
	}
}

// TestConnLimiter: a client over its cap gets a 429 and is closed; closing
// one of its connections frees a slot; a trusted proxy has more room.
func TestConnLimiter(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newConnLimiter(inner, 2, 3, nil)
	defer ln.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	over := dial()
	over.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(over).ReadString('\n')
	if !strings.HasPrefix(line, "HTTP/1.1 429") {
		t.Errorf("third connection read %q, %v; want a 429", line, err)
	}
	first := <-accepted
	<-accepted
	first.Close()
	dial()
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Error("after closing one, a new connection was not accepted")
	}
	proxies := newConnLimiter(inner, 2, 3, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	for range 3 {
		if !proxies.take(netip.MustParseAddr("127.0.0.1")) {
			t.Fatal("a trusted proxy was refused below its cap of 3")
		}
	}
	if proxies.take(netip.MustParseAddr("127.0.0.1")) {
		t.Error("a trusted proxy was let over its cap")
	}
}

func TestTightenDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "portal.db")
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := tightenDataDir(dir, false, slog.New(slog.NewTextHandler(io.Discard, nil))); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{dir: 0o700, db: 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
}
