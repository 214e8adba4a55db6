package testnet

import (
	"encoding/binary"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A Net, and an address AddHostAddr makes the host's, change no address
// in the host's network namespace, which every Chromium there would take
// for a network change (ERR_NETWORK_CHANGED on its requests under way),
// and still work: the namespace reaches the host's end (a host address),
// the host reaches the other; a process of the host binds the added
// address and connects from it.
func TestNew_NoHostAddressChange(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root")
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: unix.RTMGRP_IPV4_IFADDR | unix.RTMGRP_IPV6_IFADDR}); err != nil {
		t.Fatal(err)
	}
	var index int
	t.Run("Net", func(t *testing.T) {
		n := New(t)
		ifi, err := net.InterfaceByName(n.NS)
		if err != nil {
			t.Fatal(err)
		}
		index = ifi.Index
		host := Listen(t, n.Host+":0")
		var beyond *Listener
		n.InOutside(t, func() { beyond = Listen(t, n.Outside+":0") })
		var said string
		var reachErr error
		n.InOutside(t, func() { said, reachErr = reach(n.Host, host.Port) })
		if !strings.HasSuffix(said, "reached") {
			t.Errorf("the namespace to the host's end %s: %q, %v; want reached", n.Host, said, reachErr)
		}
		if said, err := reach(n.Outside, beyond.Port); !strings.HasSuffix(said, "reached") {
			t.Errorf("the host to the namespace's end %s: %q, %v; want reached", n.Outside, said, err)
		}
	}) // its cleanup has removed it
	const added = "198.18.9.9"
	t.Run("HostAddr", func(t *testing.T) {
		AddHostAddr(t, added)
		l := Listen(t, "127.0.0.1:0")
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(added)}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Port)))
		if err != nil {
			t.Fatalf("from %s, which AddHostAddr made the host's: %v", added, err)
		}
		c.Close()
	}) // its cleanup has removed it
	unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
	buf := make([]byte, 1<<16)
	for {
		k, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			break // nothing more within the timeout
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:k])
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if (m.Header.Type != unix.RTM_NEWADDR && m.Header.Type != unix.RTM_DELADDR) || len(m.Data) < unix.SizeofIfAddrmsg {
				continue
			}
			if int(binary.NativeEndian.Uint32(m.Data[4:8])) == index {
				t.Errorf("netlink message %d for the host's end of the Net (index %d): an address added or removed in the host's namespace", m.Header.Type, index)
			}
			attrs, _ := syscall.ParseNetlinkRouteAttr(&m)
			for _, a := range attrs {
				if ip := net.IP(a.Value); len(a.Value) == 4 && ip.String() == added {
					t.Errorf("netlink message %d for %s: AddHostAddr added or removed an address in the host's namespace", m.Header.Type, added)
				}
			}
		}
	}
}

// reach asks http://addr:port/ over a connection this goroutine opens
// (so in its network namespace) and returns what it said.
func reach(addr string, port int) (string, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(addr, strconv.Itoa(port)), 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	return string(b), err
}
