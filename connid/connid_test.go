package connid

import (
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestClassify_Owners(t *testing.T) {
	c := New(Config{Desktop: desktopRange})
	for _, tc := range []struct {
		name string
		uid  int
		want Kind
	}{
		{"DesktopUID", 201450, Desktop},
		{"OtherLocalUser", 4242, Host},
		{"Root", 0, Host},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, addr := range []string{"127.0.0.1:0", "[::1]:0"} {
				ln, err := net.Listen("tcp", addr)
				if err != nil {
					continue // no IPv6 loopback
				}
				defer ln.Close()
				dialAs(t, tc.uid, "tcp", ln.Addr().String())
				v := c.Classify(mustAccept(t, ln))
				if v.Kind != tc.want || !v.Owned || v.UID != tc.uid {
					t.Errorf("%s: uid %d: Classify = %+v; want %v, owned by %d", addr, tc.uid, v, tc.want, tc.uid)
				}
			}
		})
	}
}

// TestClassify_HostAddress: a connection from another of the host's
// addresses than loopback is looked up too, not taken for another host's.
func TestClassify_HostAddress(t *testing.T) {
	ip := hostAddress(t)
	c := New(Config{Desktop: desktopRange})
	ln := mustListen(t, "tcp", net.JoinHostPort(ip, "0"))
	dialAs(t, 201452, "tcp", ln.Addr().String())
	if v := c.Classify(mustAccept(t, ln)); v.Kind != Desktop {
		t.Errorf("desktop uid from %s: Classify = %+v; want desktop", ip, v)
	}
	// Desktops of a portal that is not root run as its uid: from a host
	// address other than loopback, that uid may be their network stack.
	shared := New(Config{SharedUID: true})
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if v := shared.Classify(mustAccept(t, ln)); v.Kind != Desktop || v.UID != os.Geteuid() {
		t.Errorf("the portal's own uid from %s, desktops sharing it: Classify = %+v; want desktop", ip, v)
	}
	lo := mustListen(t, "tcp", "127.0.0.1:0")
	client2, err := net.Dial("tcp", lo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client2.Close()
	if v := shared.Classify(mustAccept(t, lo)); v.Kind != Host {
		t.Errorf("the portal's own uid from loopback, desktops sharing it: Classify = %+v; want host", v)
	}
}

// TestClassify_FailsClosed: the states a closed or closing peer socket
// is in are never taken for their owner.
func TestClassify_FailsClosed(t *testing.T) {
	c := New(Config{Desktop: desktopRange})
	ln := mustListen(t, "tcp", "127.0.0.1:0")
	dial := func() *net.TCPConn {
		cl, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return cl.(*net.TCPConn)
	}
	t.Run("Closed", func(t *testing.T) {
		cl := dial()
		cl.Write([]byte("POST / HTTP/1.1\r\n\r\n"))
		cl.Close() // orphaned: FIN_WAIT1/2 with no owner (uid 0 in /proc/net/tcp)
		s := mustAccept(t, ln)
		v := c.Classify(s)
		if v.Kind != Unknown || v.Owned || !strings.Contains(v.Reason, "no owner") {
			t.Errorf("Classify = %+v; want unknown, closing with no owner", v)
		}
	})
	t.Run("TimeWait", func(t *testing.T) {
		cl := dial()
		s := mustAccept(t, ln)
		remote, _ := tcpAddrPort(s.RemoteAddr())
		local, _ := tcpAddrPort(s.LocalAddr())
		cl.Close()
		time.Sleep(50 * time.Millisecond)
		s.Close()
		waitState(t, remote, local, tcpTimeWait)
		if v := c.classifyTCP(remote, local); v.Kind != Unknown || v.Owned {
			t.Errorf("Classify = %+v; want unknown, TIME_WAIT has no owner", v)
		}
	})
	t.Run("HalfClosed", func(t *testing.T) {
		cl := dial()
		defer cl.Close()
		cl.CloseWrite() // FIN_WAIT2, still owned
		s := mustAccept(t, ln)
		if v := c.Classify(s); v.Kind != Unknown || !v.Owned || !strings.Contains(v.Reason, "not ESTABLISHED") {
			t.Errorf("Classify = %+v; want unknown, owned but not ESTABLISHED", v)
		}
	})
	t.Run("Reset", func(t *testing.T) {
		cl := dial()
		cl.Write([]byte("POST / HTTP/1.1\r\n\r\n"))
		cl.SetLinger(0)
		cl.Close() // RST: the peer socket is gone at once
		s := mustAccept(t, ln)
		if v := c.Classify(s); v.Kind != Unknown || !strings.Contains(v.Reason, "gone") {
			t.Errorf("Classify = %+v; want unknown, socket gone", v)
		}
	})
	t.Run("NetlinkError", func(t *testing.T) {
		broken := New(Config{})
		broken.lookup = func(peer, local netip.AddrPort) (sock, error) { return sock{}, os.ErrPermission }
		cl := dial()
		defer cl.Close()
		if v := broken.Classify(mustAccept(t, ln)); v.Kind != Unknown {
			t.Errorf("Classify with sock_diag failing = %+v; want unknown", v)
		}
	})
}

// tcpTimeWait is TCP_TIME_WAIT (include/net/tcp_states.h).
const tcpTimeWait = 6

// waitState waits until the socket peer→local is in state.
func waitState(t *testing.T, peer, local netip.AddrPort, state uint8) {
	t.Helper()
	for range 100 {
		s, err := lookupSocket(peer, local)
		if err == nil && s.found && s.state == state {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("socket %s→%s never reached %s", peer, local, stateName(state))
}

func TestIsHostAddr(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{{"127.0.0.1", true}, {"127.3.4.5", true}, {"::1", true}, {hostAddress(t), true}, {"192.0.2.7", false}} {
		got, err := isHostAddr(netip.MustParseAddr(tc.addr))
		if err != nil && tc.want {
			t.Errorf("isHostAddr(%s): %v", tc.addr, err)
		} else if got != tc.want {
			t.Errorf("isHostAddr(%s) = %v; want %v", tc.addr, got, tc.want)
		}
	}
}

// TestHostPrefixes: the host's own address is listed with its device,
// loopback's never (the e2e identity attack lists a local route with no
// address record).
func TestHostPrefixes(t *testing.T) {
	own := netip.MustParseAddr(hostAddress(t))
	hps, err := HostPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, hp := range hps {
		if hp.Prefix.Addr().IsLoopback() {
			t.Errorf("HostPrefixes lists %v; want no loopback", hp)
		}
		found = found || hp.Prefix == netip.PrefixFrom(own, 32) && hp.Dev != ""
	}
	if !found {
		t.Errorf("HostPrefixes() = %v; want %s/32 with its device", hps, own)
	}
}

func TestClassify_Unix(t *testing.T) {
	c := New(Config{Desktop: desktopRange})
	dir, err := os.MkdirTemp("", "connid-unix")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	os.Chmod(dir, 0o755) // other uids must reach the socket
	path := filepath.Join(dir, "http.sock")
	ln := mustListen(t, "unix", path)
	os.Chmod(path, 0o666)
	for _, tc := range []struct {
		uid  int
		want Kind
	}{{201460, Desktop}, {4250, Host}} {
		dialAs(t, tc.uid, "unix", path)
		if v := c.Classify(mustAccept(t, ln)); v.Kind != tc.want || !v.Unix || v.UID != tc.uid {
			t.Errorf("uid %d through a Unix socket: Classify = %+v; want %v", tc.uid, v, tc.want)
		}
	}
}

// TestListener: Accept hands out classified connections, and Close ends
// Accept.
func TestListener(t *testing.T) {
	inner := mustListen(t, "tcp", "127.0.0.1:0")
	ln := NewListener(inner, New(Config{}))
	cl, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if v, ok := VerdictOf(c); !ok || v.Kind != Host {
		t.Errorf("VerdictOf(accepted) = %+v, %v; want host", v, ok)
	}
	// Connections come out in the order they were accepted, however
	// their lookups interleave: a client's connection over a cap is the
	// one it opened last.
	for i := range 50 {
		cl, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		cl.Write([]byte{byte(i)})
	}
	for i := range 50 {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b := make([]byte, 1)
		if _, err := c.Read(b); err != nil || int(b[0]) != i {
			t.Fatalf("connection %d accepted as the %dth (%v)", b[0], i, err)
		}
	}
	ln.Close()
	if _, err := ln.Accept(); err == nil {
		t.Error("Accept after Close returned no error")
	}
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

// TestClassify_LinkLocal: a connection to a link-local address (fe80::/10,
// scoped to an interface) is attributed to its owner, in a network
// namespace the test makes with a veth pair.
func TestClassify_LinkLocal(t *testing.T) {
	if os.Getenv("CONNID_NETNS") == "" {
		if os.Geteuid() != 0 {
			t.Skip("needs root for a network namespace")
		}
		cmd := exec.Command("unshare", "--net", os.Args[0], "-test.run=^TestClassify_LinkLocal$", "-test.v")
		cmd.Env = append(os.Environ(), "CONNID_NETNS=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestClassify_LinkLocal") {
			t.Fatalf("in a network namespace of its own: %v\n%s", err, out)
		}
		return
	}
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "ll0", "type", "veth", "peer", "name", "ll1"},
		{"link", "set", "ll1", "up"},
		{"link", "set", "ll0", "up"},
		{"-6", "addr", "add", "fe80::1/64", "dev", "ll0", "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	c := New(Config{Desktop: desktopRange})
	ln := mustListen(t, "tcp", "[fe80::1%ll0]:0")
	port := ln.Addr().(*net.TCPAddr).Port
	dialAs(t, 201453, "tcp", net.JoinHostPort("fe80::1%ll0", strconv.Itoa(port)))
	if v := c.Classify(mustAccept(t, ln)); v.Kind != Desktop || !v.Owned || v.UID != 201453 {
		t.Errorf("desktop uid over a link-local address: Classify = %+v; want desktop, owned by 201453", v)
	}
}
