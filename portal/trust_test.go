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

	"github.com/corral-dev/corral-vdi-portal/connid"
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
			if !slices.Equal(c.Auth.Modes, tc.auth) {
				t.Errorf("Auth.Modes = %v; want %v", c.Auth.Modes, tc.auth)
			}
			if c.Console.MaxConsolesPerUser != 10 {
				t.Errorf("MaxConsolesPerUser = %d; want 10", c.Console.MaxConsolesPerUser)
			}
		})
	}
	env := map[string]string{"CORRAL_VDI_BACKEND": "local", "CORRAL_VDI_PUBLIC_URL": "https://vdi.example.com/x, http://b.example:8080",
		"CORRAL_VDI_MAX_CONSOLES_PER_USER": "0", "CORRAL_VDI_METRICS_TOKEN": " tok \n"}
	c, err := ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"https://vdi.example.com", "http://b.example:8080"}; !slices.Equal(c.Server.PublicURLs, want) {
		t.Errorf("PublicURLs = %v; want %v", c.Server.PublicURLs, want)
	}
	if c.Console.MaxConsolesPerUser != -1 || c.Server.MetricsToken != "tok" {
		t.Errorf("MaxConsolesPerUser %d, MetricsToken %q; want -1 (no cap), tok", c.Console.MaxConsolesPerUser, c.Server.MetricsToken)
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
}

// TestConnLimiter_Owners: on this host a connection counts against its
// owner, so a desktop sharing 127.0.0.1 with the trusted proxy uses up
// its own cap, never the proxy's.
func TestConnLimiter_Owners(t *testing.T) {
	l := newConnLimiter(nil, 2, 3, []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")})
	lo := netip.MustParseAddr("127.0.0.1")
	conn := func(v connid.Verdict) net.Conn { return &connid.Conn{Verdict: v} }
	proxy := conn(connid.Verdict{Kind: connid.Host, Addr: lo, UID: 0, Owned: true})
	desktop := conn(connid.Verdict{Kind: connid.Desktop, Addr: lo, UID: 80001, Owned: true})
	unowned := conn(connid.Verdict{Kind: connid.Unknown, Addr: lo})
	for _, tc := range []struct {
		name string
		c    net.Conn
		cap  int
	}{
		{"desktop", desktop, 2},
		{"trusted proxy", proxy, 3},
		{"unowned", unowned, 2},
		{"unix peer", conn(connid.Verdict{Kind: connid.Host, Unix: true, UID: 33, Owned: true}), 3},
		{"unix desktop", conn(connid.Verdict{Kind: connid.Desktop, Unix: true, UID: 80002, Owned: true}), 2},
		{"remote proxy address", conn(connid.Verdict{Kind: connid.Remote, Addr: lo}), 3},
		{"remote", conn(connid.Verdict{Kind: connid.Remote, Addr: netip.MustParseAddr("192.0.2.1")}), 2},
	} {
		key, limit := l.client(tc.c)
		for i := range tc.cap {
			if !l.take(key, limit) {
				t.Fatalf("%s: refused at %d, below its cap of %d (key %q)", tc.name, i, tc.cap, key)
			}
		}
		if l.take(key, limit) {
			t.Errorf("%s: let over its cap of %d (key %q)", tc.name, tc.cap, key)
		}
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
