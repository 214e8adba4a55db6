package portal

import (
	"context"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/local"
)

// acceptFrom listens on loopback, runs connect (which must connect to the
// address it is given) and returns whether the accepted connection was
// marked as coming from a desktop.
func acceptFrom(t *testing.T, sandbox *local.Sandbox, connect func(addr string)) bool {
	t.Helper()
	return acceptOn(t, "127.0.0.1:0", sandbox, connect)
}

// acceptOn is acceptFrom on the listen address addr.
func acceptOn(t *testing.T, addr string, sandbox *local.Sandbox, connect func(addr string)) bool {
	t.Helper()
	inner, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	ln := newConnLimiter(connid.NewListener(inner, classifier(sandbox)), 0, 0, nil)
	defer ln.Close()
	go connect(ln.Addr().String())
	inner.(*net.TCPListener).SetDeadline(time.Now().Add(10 * time.Second))
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return auth.FromDesktop(connContext(slog.New(slog.DiscardHandler))(context.Background(), c))
}

func TestDesktopConnContext(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to connect as a desktop uid")
	}
	sandbox, err := local.NewSandbox(local.SandboxConfig{UIDs: "201400-201499", Registry: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("PortalItself", func(t *testing.T) {
		if acceptFrom(t, sandbox, func(addr string) {
			if c, err := net.Dial("tcp", addr); err == nil {
				time.Sleep(time.Second)
				c.Close()
			}
		}) {
			t.Error("a connection of the portal's own uid was marked as from a desktop")
		}
	})
	asUID := func(uid int) func(addr string) {
		return func(addr string) {
			host, port, _ := net.SplitHostPort(addr)
			cmd := exec.Command("setpriv", "--reuid="+strconv.Itoa(uid), "--regid="+strconv.Itoa(uid), "--clear-groups",
				"bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+port+"; sleep 2")
			cmd.Run()
		}
	}
	t.Run("DesktopUID", func(t *testing.T) {
		if !acceptFrom(t, sandbox, asUID(201450)) {
			t.Error("a connection of desktop uid 201450 was not marked")
		}
	})
	t.Run("OtherLocalUser", func(t *testing.T) {
		if acceptFrom(t, sandbox, asUID(4242)) {
			t.Error("a connection of uid 4242 (no desktop) was marked")
		}
	})
	t.Run("HostAddress", func(t *testing.T) {
		ip := hostAddress(t)
		if !acceptOn(t, net.JoinHostPort(ip, "0"), sandbox, asUID(201452)) {
			t.Errorf("a connection of desktop uid 201452 to this host's %s was not marked", ip)
		}
		if acceptOn(t, net.JoinHostPort(ip, "0"), sandbox, asUID(4244)) {
			t.Errorf("a connection of uid 4244 to this host's %s was marked", ip)
		}
	})
	t.Run("IPv6", func(t *testing.T) {
		ln, err := net.Listen("tcp", "[::1]:0")
		if err != nil {
			t.Skip("no IPv6 loopback")
		}
		ln.Close()
		if !acceptOn(t, "[::1]:0", sandbox, asUID(201451)) {
			t.Error("an IPv6 loopback connection of desktop uid 201451 was not marked")
		}
		if acceptOn(t, "[::1]:0", sandbox, asUID(4243)) {
			t.Error("an IPv6 loopback connection of uid 4243 was marked")
		}
	})
	// The forged-header attack: send and close at once. Classified while
	// open, the socket is the desktop uid's; once closed it is orphaned
	// (no owner: /proc/net/tcp lists uid 0, which the table read of
	// before took for root's). Either way the connection is marked.
	t.Run("ClosedAtOnce", func(t *testing.T) {
		for i := range 20 {
			if !acceptFrom(t, sandbox, func(addr string) {
				host, port, _ := net.SplitHostPort(addr)
				exec.Command("setpriv", "--reuid=201453", "--regid=201453", "--clear-groups", "bash", "-c",
					"exec 3<>/dev/tcp/"+host+"/"+port+"; printf 'POST /api/vdi/desktops/local/m/assign HTTP/1.1\\r\\nTailscale-User-Login: admin\\r\\n\\r\\n' >&3; exec 3>&-").Run()
			}) {
				t.Fatalf("attempt %d: a desktop uid's connection closed at once was not marked", i)
			}
		}
	})
}

// hostAddress returns an IPv4 address of this host that is not loopback.
func hostAddress(t *testing.T) string {
	t.Helper()
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLoopback() {
			return n.IP.String()
		}
	}
	t.Skip("no IPv4 address but loopback")
	return ""
}
