// Package testnet gives tests places on the network of their own: a
// network namespace reached through a route (the network beyond the
// host), and the host's own addresses beyond loopback (what a desktop
// must never reach), each with listeners that say whether they were
// reached. Everything is removed when the test ends.
package testnet

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Net is a veth pair: Host is its end on the host (a host address), Outside
// its end in a network namespace of the test's, routed from the host.
type Net struct {
	Host, Outside string // IPv4 addresses
	NS            string // the namespace's name (ip netns)
}

// New makes the veth pair with 10.231.N.1 on the host and 10.231.N.2 in a
// new network namespace, N free across every test process on the machine
// (Reserve). It skips the test only where the host cannot make them (not
// root, or a kernel that refuses: see absent) and fails it on any other
// failure of ip, saying what ip said.
//
// The host's end gets no address record: 10.231.N.1 is the host's by a
// route of type local (the kernel delivers to it, binds on it and answers
// ARP for it as for any address of the host's: all of that is the
// routing's), and the end makes no IPv6 link-local address. An address
// added or removed in the host's network namespace is a network change to
// every Chromium running there (its NetworkChangeNotifier watches netlink
// for them), which fails its requests under way with ERR_NETWORK_CHANGED:
// browser tests run beside these.
func New(t testing.TB) *Net {
	t.Helper()
	id, n := Reserve(t, "cvdn")
	prefix := fmt.Sprintf("10.231.%d", n)
	nt := &Net{Host: prefix + ".1", Outside: prefix + ".2", NS: id}
	steps := [][]string{{"link", "add", id, "type", "veth", "peer", "name", id + "p", "netns", id}}
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		steps = append(steps, []string{"link", "set", id, "addrgenmode", "none"})
	}
	for _, args := range append(steps, [][]string{
		{"link", "set", id, "up"},
		{"route", "add", "local", nt.Host, "dev", id, "table", "local"},
		{"route", "add", prefix + ".0/30", "dev", id, "src", nt.Host},
		{"-n", id, "addr", "add", nt.Outside + "/30", "dev", id + "p"},
		{"-n", id, "link", "set", id + "p", "up"},
		{"-n", id, "link", "set", "lo", "up"},
		{"-n", id, "route", "add", "default", "via", nt.Host},
	}...) {
		ip(t, args...)
	}
	t.Cleanup(func() { exec.Command("ip", "link", "del", id).Run() })
	return nt
}

// Reserve makes a network namespace named base+N for N in 1..250 and
// returns its name and N, which the caller may use for its addresses
// (10.x.N.0) and device names (base+N+suffix): "ip netns add" fails for a
// name that exists, so no two test processes on the machine, nor a
// namespace an earlier run left, get the same N. The namespace goes when
// the test ends. It skips the test only where the host cannot make one
// (not root, or a kernel that refuses: see absent) and fails it otherwise.
func Reserve(t testing.TB, base string) (string, int) {
	t.Helper()
	mustRoot(t)
	var said []byte
	for n := 1; n <= 250; n++ {
		name := fmt.Sprintf("%s%d", base, n)
		if _, err := os.Stat("/run/netns/" + name); err == nil {
			continue
		}
		args := []string{"netns", "add", name}
		out, err := exec.Command("ip", args...).CombinedOutput()
		said = out
		if err == nil {
			t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
			return name, n
		}
		if !strings.Contains(string(out), "File exists") { // else another process made it since the Stat
			ipFailed(t, args, out, err)
		}
	}
	t.Fatalf("no network namespace %s1 to %s250 could be made: all exist (left by killed runs? ip netns list); the last: %s", base, base, said)
	return "", 0
}

// OutsideURL makes a Net and serves HTTP "reached" on its outside end (the
// network beyond the host, which a desktop with outbound network may
// reach); it returns the URL.
func OutsideURL(t testing.TB) string {
	t.Helper()
	n := New(t)
	var l *Listener
	n.InOutside(t, func() { l = Listen(t, n.Outside+":0") })
	return fmt.Sprintf("http://%s:%d/", n.Outside, l.Port)
}

// InOutside runs fn on a thread in the namespace, so the sockets fn makes
// live there.
func (n *Net) InOutside(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/var/run/netns/" + n.NS)
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err == nil {
			fn()
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatalf("enter the test's network namespace: %v", err)
	}
}

// Listener answers HTTP "reached" on TCP and counts UDP datagrams, on one
// port of one address.
type Listener struct {
	Port int
	udp  net.PacketConn
	mu   sync.Mutex
	n    int64
}

// Datagrams returns how many UDP datagrams reached l: it reads what the
// kernel holds for l's socket now (no goroutine of its own that may not
// have run yet), so a datagram delivered before the call is counted.
func (l *Listener) Datagrams() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	buf := make([]byte, 2048)
	for {
		l.udp.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, _, err := l.udp.ReadFrom(buf); err != nil {
			return l.n
		}
		l.n++
	}
}

// Listen serves on addr's TCP and UDP port of the same number ("[::]:0"
// takes a free one); it runs in the caller's network namespace.
func Listen(t testing.TB, addr string) *Listener {
	t.Helper()
	for range 20 {
		tl, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		port := tl.Addr().(*net.TCPAddr).Port
		host, _, _ := net.SplitHostPort(addr)
		ul, err := net.ListenPacket("udp", net.JoinHostPort(host, fmt.Sprint(port)))
		if err != nil {
			tl.Close() // the UDP port is taken: another
			continue
		}
		l := &Listener{Port: port, udp: ul}
		srv := &http.Server{Handler: reached}
		go srv.Serve(tl)
		t.Cleanup(func() { srv.Close(); ul.Close() })
		return l
	}
	t.Fatalf("no port free for both TCP and UDP on %s", addr)
	return nil
}

// ListenAbstract serves HTTP "reached" on an abstract Unix socket of the
// caller's network namespace (abstract names belong to one); it returns
// the name, without its leading NUL (curl's --abstract-unix-socket).
func ListenAbstract(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("corral-test-%d-%d", os.Getpid(), time.Now().UnixNano())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: reached}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return name
}

// reached answers every request with "reached".
var reached = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })
