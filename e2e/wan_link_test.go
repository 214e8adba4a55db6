package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/mxschmitt/playwright-go"
	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral-vdi-portal/internal/testbrowser"
	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// wanProfile is a network between the browser and the portal: a round
// trip, a rate and a packet loss in each direction (see wire).
type wanProfile struct {
	Name string
	RTT  int     // ms
	Mbit int     // 0: not shaped
	Loss float64 // percent
}

// wanProfiles are the three networks.
var wanProfiles = []wanProfile{
	{"LAN", 0, 0, 0},
	{"40ms-20Mbit-0.5%", 40, 20, 0.5},
	{"120ms-5Mbit-1%", 120, 5, 1},
}

// wanLink is a shaped path from a network namespace holding Chromium to the
// portal: Chromium opens the portal's own URL (127.0.0.1:port inside the
// namespace), a forwarder there carries each connection across a pair of
// TUN devices joined by the emulator (wire) to a forwarder on the host
// side, which dials the portal on loopback. So the portal sees what it
// sees in every other e2e test (a loopback peer, its own Host), while every
// byte crosses the shaped link.
type wanLink struct {
	NS      string
	hostDev string
	wire    *wire
}

// wanSlot is a link's namespace and its two addresses, reserved before
// the portal starts (its WebRTC path names the host's address).
type wanSlot struct {
	ns, hostIP, nsIP string
	id               int
}

// reserveWAN reserves a namespace for a link.
func reserveWAN(t *testing.T) wanSlot {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	ns, id := testnet.Reserve(t, "cvw")
	return wanSlot{ns: ns, id: id, hostIP: fmt.Sprintf("10.123.%d.1", id), nsIP: fmt.Sprintf("10.123.%d.2", id)}
}

// mustWANLinkIn makes, in a reserved slot, the namespace, the TUN pair,
// the emulator and both forwarders for the portal p; all go when the test
// ends. Packets of any kind cross it between the namespace and the host's
// address (a WebRTC track's UDP too), shaped alike.
func mustWANLinkIn(t *testing.T, p *Portal, slot wanSlot) *wanLink {
	t.Helper()
	id, hostIP, nsIP := slot.id, slot.hostIP, slot.nsIP
	l := &wanLink{NS: slot.ns, hostDev: fmt.Sprintf("cvwh%d", id), wire: &wire{}}
	peerDev := fmt.Sprintf("cvwp%d", id)
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	host, err := openTUN(l.hostDev)
	must(t, err)
	t.Cleanup(func() { host.Close() })
	peer, err := openTUN(peerDev)
	must(t, err)
	t.Cleanup(func() { peer.Close() })
	go l.wire.carry(host, peer, 0)
	go l.wire.carry(peer, host, 1)
	run("link", "set", peerDev, "netns", l.NS)
	// The host's end gets hostIP by a route of type local, with no address
	// record and no IPv6 link-local address: an address added in the
	// host's network namespace fails the requests under way of every other
	// test's Chromium there (see testnet.New).
	if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil {
		run("link", "set", l.hostDev, "addrgenmode", "none")
	}
	run("link", "set", l.hostDev, "mtu", "1500", "up")
	run("route", "add", "local", hostIP, "dev", l.hostDev, "table", "local")
	run("route", "add", nsIP, "dev", l.hostDev, "src", hostIP)
	run("-n", l.NS, "addr", "add", nsIP, "peer", hostIP, "dev", peerDev)
	run("-n", l.NS, "link", "set", peerDev, "mtu", "1500", "up")
	run("-n", l.NS, "link", "set", "lo", "up")

	portal := strings.TrimPrefix(p.URL, "http://")
	hostSide, err := net.Listen("tcp", hostIP+":0")
	must(t, err)
	t.Cleanup(func() { hostSide.Close() })
	go forward(hostSide, func() (net.Conn, error) { return net.Dial("tcp", portal) })
	inNS, dial, err := listenInNS(l.NS, portal, hostSide.Addr().String())
	must(t, err)
	t.Cleanup(func() { inNS.Close() })
	go forward(inNS, dial)
	return l
}

// forward accepts on l until it closes and pipes each connection to one
// that dial makes.
func forward(l net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := dial()
			if err != nil {
				return
			}
			defer u.Close()
			done := make(chan struct{})
			go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite(); close(done) }()
			io.Copy(c, u)
			c.(*net.TCPConn).CloseWrite()
			<-done
		}()
	}
}

// listenInNS listens on addr inside the network namespace ns and returns a
// dialer of target whose sockets are made in ns too. A socket belongs to
// the namespace of the thread that made it, so one goroutine locked to a
// thread moved into ns makes them all; that thread is never unlocked, so
// it ends with the goroutine instead of going back to the runtime.
func listenInNS(ns, addr, target string) (net.Listener, func() (net.Conn, error), error) {
	type dialed struct {
		c   net.Conn
		err error
	}
	ready := make(chan error, 1)
	asks := make(chan chan dialed)
	l := &nsListener{done: make(chan struct{})}
	go func() {
		runtime.LockOSThread()
		f, err := os.Open(filepath.Join("/run/netns", ns))
		if err == nil {
			err = unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
			f.Close()
		}
		if err == nil {
			l.Listener, err = net.Listen("tcp", addr)
		}
		ready <- err
		if err != nil {
			return
		}
		for {
			select {
			case ask := <-asks:
				c, err := net.Dial("tcp", target)
				ask <- dialed{c, err}
			case <-l.done:
				return
			}
		}
	}()
	if err := <-ready; err != nil {
		return nil, nil, fmt.Errorf("listen in netns %s: %w", ns, err)
	}
	dial := func() (net.Conn, error) {
		ask := make(chan dialed, 1)
		select {
		case asks <- ask:
		case <-l.done:
			return nil, net.ErrClosed
		}
		d := <-ask
		return d.c, d.err
	}
	return l, dial, nil
}

// nsListener is a listener whose Close also ends the namespace's dialer.
type nsListener struct {
	net.Listener
	once sync.Once
	done chan struct{}
}

// Close closes the listener and ends the dialer goroutine.
func (l *nsListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// shape switches the link to profile q.
func (l *wanLink) shape(q wanProfile) { l.wire.set(q) }

// sentToBrowser returns the bytes the host's side of the link has sent
// towards the browser (the portal's answers and the desktop's frames, with
// TCP/IP headers and retransmissions).
func (l *wanLink) sentToBrowser(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + l.hostDev + "/statistics/tx_bytes")
	must(t, err)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// mustLaunchBrowserIn starts Debian's Chromium inside the link's namespace
// (`ip netns exec` keeps the pipes Playwright drives it by).
func mustLaunchBrowserIn(t *testing.T, l *wanLink) playwright.Browser {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "chromium-in-netns")
	must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nexec ip netns exec "+l.NS+" /usr/bin/chromium \"$@\"\n"), 0o755))
	pw := testbrowser.MustRunPlaywright(t)
	b, err := pw.Chromium.Launch(playwright.BrowserTypeLaunchOptions{
		ExecutablePath: playwright.String(wrapper),
		Headless:       playwright.Bool(true),
		Args:           testbrowser.Flags(),
	})
	if err != nil {
		pw.Stop()
		t.Fatalf("launch Chromium in netns %s: %v", l.NS, err)
	}
	t.Cleanup(func() {
		b.Close()
		pw.Stop()
	})
	return b
}
