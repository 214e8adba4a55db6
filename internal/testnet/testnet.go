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
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// seq tells apart the pairs of one test process.
var seq atomic.Int64

// Net is a veth pair: Host is its end on the host (a host address), Outside
// its end in a network namespace of the test's, routed from the host.
type Net struct {
	Host, Outside string // IPv4 addresses
	ns            string // the namespace's name (ip netns)
}

// New makes the veth pair with prefix+".1" on the host and prefix+".2"
// in a new network namespace (prefix is three octets, e.g. "10.231.77").
// It skips the test when the host cannot make them (not root).
func New(t testing.TB, prefix string) *Net {
	t.Helper()
	id := fmt.Sprintf("cvdn%d%d", os.Getpid()%10000, seq.Add(1)%1000)
	n := &Net{Host: prefix + ".1", Outside: prefix + ".2", ns: id}
	for _, args := range [][]string{
		{"netns", "add", id},
		{"link", "add", id, "type", "veth", "peer", "name", id + "p", "netns", id},
		{"addr", "add", n.Host + "/30", "dev", id},
		{"link", "set", id, "up"},
		{"-n", id, "addr", "add", n.Outside + "/30", "dev", id + "p"},
		{"-n", id, "link", "set", id + "p", "up"},
		{"-n", id, "link", "set", "lo", "up"},
		{"-n", id, "route", "add", "default", "via", n.Host},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			exec.Command("ip", "link", "del", id).Run()
			exec.Command("ip", "netns", "del", id).Run()
			t.Skipf("ip %v: %v: %s", args, err, out)
		}
	}
	t.Cleanup(func() {
		exec.Command("ip", "link", "del", id).Run()
		exec.Command("ip", "netns", "del", id).Run()
	})
	return n
}

// InOutside runs fn on a thread in the namespace, so the sockets fn makes
// live there.
func (n *Net) InOutside(t testing.TB, fn func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		f, err := os.Open("/var/run/netns/" + n.ns)
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
