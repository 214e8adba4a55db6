//go:build !linux

package connid

import (
	"errors"
	"net"
	"net/netip"
)

var errNotLinux = errors.New("connection owners are only read on Linux")

// lookupSocket cannot ask the kernel here: every connection from this
// host is Unknown (fail closed).
func lookupSocket(peer, local netip.AddrPort) (sock, error) { return sock{}, errNotLinux }

// isHostAddr cannot ask the kernel here: every peer is looked up (and so
// is Unknown) unless it is plainly another host's.
func isHostAddr(a netip.Addr) (bool, error) { return false, errNotLinux }

// PeerUID is only implemented on Linux; elsewhere Unix-socket peers are
// Unknown and the admin socket refuses every caller.
func PeerUID(*net.UnixConn) (int, error) {
	return 0, errors.New("peer credentials are only read on Linux; set CORRAL_VDI_ADMIN_SOCKET=off")
}

// HostPrefixes cannot ask the kernel here: the interfaces' addresses are
// all a caller learns of the host.
func HostPrefixes() ([]HostPrefix, error) { return nil, nil }
