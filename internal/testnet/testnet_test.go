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

// A Net changes no address in the host's network namespace, which every
// Chromium there would take for a network change (ERR_NETWORK_CHANGED on
// its requests under way), and still works both ways: the namespace
// reaches the host's end (a host address), the host reaches the other.
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
			if (m.Header.Type == unix.RTM_NEWADDR || m.Header.Type == unix.RTM_DELADDR) && len(m.Data) >= unix.SizeofIfAddrmsg &&
				int(binary.NativeEndian.Uint32(m.Data[4:8])) == index {
				t.Errorf("netlink message %d for the host's end of the Net (index %d): an address added or removed in the host's namespace", m.Header.Type, index)
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
