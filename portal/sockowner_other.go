//go:build !linux

package portal

import (
	"net"
	"net/netip"
)

// localSocketOwner cannot read the socket table here: no connection is
// attributed, and loopback peers are treated as desktops (fail closed).
func localSocketOwner(from, to netip.AddrPort) (uid int, found bool, err error) {
	return 0, false, nil
}

// tcpAddrPort returns a's address and port, or false when a is not TCP.
func tcpAddrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	return t.AddrPort(), true
}
