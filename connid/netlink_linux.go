package connid

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// netlinkTimeout bounds one netlink answer; the kernel answers at once.
var netlinkTimeout = unix.Timeval{Sec: 2}

// netlinkAsk sends one netlink request (no dump: one answer) of type typ
// with body on a fresh socket of protocol proto, and returns the
// answer's messages. An NLMSG_ERROR answer is returned as its errno.
func netlinkAsk(proto int, typ uint16, body []byte) ([]syscall.NetlinkMessage, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, proto)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &netlinkTimeout); err != nil {
		return nil, err
	}
	kernel := &unix.SockaddrNetlink{Family: unix.AF_NETLINK}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg[0:], uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	binary.NativeEndian.PutUint32(msg[8:], 1) // sequence
	msg = append(msg, body...)
	if err := unix.Sendto(fd, msg, 0, kernel); err != nil {
		return nil, err
	}
	buf := make([]byte, 16384)
	n, _, err := unix.Recvfrom(fd, buf, 0)
	if err != nil {
		return nil, err
	}
	msgs, err := syscall.ParseNetlinkMessage(buf[:n])
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.NLMSG_ERROR {
			if len(m.Data) < 4 {
				return nil, errors.New("netlink: short error message")
			}
			if errno := -int32(binary.NativeEndian.Uint32(m.Data)); errno != 0 {
				return nil, syscall.Errno(errno)
			}
		}
	}
	return msgs, nil
}

// lookupSocket finds the TCP socket of this network namespace whose own
// address is peer and whose remote address is local, by its exact
// 4-tuple: sock_diag (NETLINK_INET_DIAG) answers from the kernel's socket
// hash, so the cost does not grow with the number of sockets. For an
// accepted connection c, lookupSocket(c.RemoteAddr(), c.LocalAddr()) is
// the socket of the process that connected.
func lookupSocket(peer, local netip.AddrPort) (sock, error) {
	pa, la := peer.Addr().Unmap(), local.Addr().Unmap()
	family := uint8(unix.AF_INET6)
	if pa.Is4() && la.Is4() {
		family = unix.AF_INET
	}
	// struct inet_diag_req_v2: family, protocol, ext, pad, states, then
	// struct inet_diag_sockid: sport, dport (big endian), src[16],
	// dst[16], if, cookie[2].
	req := make([]byte, 56)
	req[0], req[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(req[4:], 0xffffffff) // every state: TIME_WAIT must be seen to be refused
	binary.BigEndian.PutUint16(req[8:], peer.Port())
	binary.BigEndian.PutUint16(req[10:], local.Port())
	putAddr(req[12:28], pa, family)
	putAddr(req[28:44], la, family)
	// A link-local socket is found only with its interface: the kernel
	// matches its bound device (without it, sock_diag says ENOENT and the
	// peer is untrusted, however it is owned).
	if ifindex, err := zoneIndex(la.Zone()); err != nil {
		return sock{}, err
	} else if ifindex > 0 {
		binary.NativeEndian.PutUint32(req[44:], uint32(ifindex))
	}
	binary.NativeEndian.PutUint32(req[48:], 0xffffffff) // INET_DIAG_NOCOOKIE
	binary.NativeEndian.PutUint32(req[52:], 0xffffffff)
	msgs, err := netlinkAsk(unix.NETLINK_SOCK_DIAG, unix.SOCK_DIAG_BY_FAMILY, req)
	if errors.Is(err, unix.ENOENT) {
		return sock{}, nil
	}
	if err != nil {
		return sock{}, err
	}
	for _, m := range msgs {
		// struct inet_diag_msg: family, state, timer, retrans, sockid
		// (48 bytes), expires, rqueue, wqueue, uid, inode.
		if m.Header.Type != unix.SOCK_DIAG_BY_FAMILY || len(m.Data) < 72 {
			continue
		}
		d := m.Data
		if binary.BigEndian.Uint16(d[4:]) != peer.Port() || binary.BigEndian.Uint16(d[6:]) != local.Port() {
			return sock{}, fmt.Errorf("sock_diag answered for ports %d→%d, not %d→%d", binary.BigEndian.Uint16(d[4:]), binary.BigEndian.Uint16(d[6:]), peer.Port(), local.Port())
		}
		return sock{found: true, state: d[1], uid: binary.NativeEndian.Uint32(d[64:]), inode: binary.NativeEndian.Uint32(d[68:])}, nil
	}
	return sock{}, errors.New("sock_diag gave no answer")
}

// zoneIndex returns the interface index an IPv6 zone names ("" is 0).
func zoneIndex(zone string) (int, error) {
	if zone == "" {
		return 0, nil
	}
	if n, err := strconv.Atoi(zone); err == nil {
		return n, nil
	}
	ifi, err := net.InterfaceByName(zone)
	if err != nil {
		return 0, fmt.Errorf("the peer's zone %q: %w", zone, err)
	}
	return ifi.Index, nil
}

// putAddr writes a in the form sock_diag takes for family.
func putAddr(b []byte, a netip.Addr, family uint8) {
	if family == unix.AF_INET {
		a4 := a.As4()
		copy(b, a4[:])
		return
	}
	a16 := a.As16() // IPv4 comes out IPv4-mapped
	copy(b, a16[:])
}

// isHostAddr reports whether the kernel delivers packets for a to this
// host (its route is of type local): one of the host's addresses, or one
// inside a local route. Only such a source can have completed a
// handshake with the portal from this host; any other source is on the
// far side of a route.
func isHostAddr(a netip.Addr) (bool, error) {
	// struct rtmsg: family, dst_len, src_len, tos, table, protocol,
	// scope, type, flags; then the RTA_DST attribute.
	family, bits := uint8(unix.AF_INET6), 128
	if a.Is4() {
		family, bits = unix.AF_INET, 32
	}
	ab := a.AsSlice()
	req := make([]byte, 12, 12+4+len(ab))
	req[0], req[1] = family, uint8(bits)
	attr := make([]byte, 4)
	binary.NativeEndian.PutUint16(attr[0:], uint16(4+len(ab)))
	binary.NativeEndian.PutUint16(attr[2:], unix.RTA_DST)
	req = append(append(req, attr...), ab...)
	msgs, err := netlinkAsk(unix.NETLINK_ROUTE, unix.RTM_GETROUTE, req)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Header.Type == unix.RTM_NEWROUTE && len(m.Data) >= 12 {
			return m.Data[7] == unix.RTN_LOCAL, nil
		}
	}
	return false, errors.New("RTM_GETROUTE gave no route")
}

// PeerUID returns the uid of the process on the other end of c, as the
// kernel recorded it when the connection was made (SO_PEERCRED).
func PeerUID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if credErr != nil {
		return 0, credErr
	}
	return int(cred.Uid), nil
}
