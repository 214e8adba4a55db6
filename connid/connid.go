// Package connid says who is on the other end of a connection to the
// portal: another host, a process of this host whose owner is known (and
// is no desktop), a desktop, or a local process whose owner cannot be
// established. The answer decides whether identity headers may be
// believed (auth) and whose allowance a connection counts against.
//
// The rule: a connection from one of the host's own addresses (loopback,
// or any address the kernel delivers locally) is trusted only when its
// owner is positively a non-desktop uid at that moment: the peer's socket,
// found by its exact 4-tuple through sock_diag, is ESTABLISHED, has a real
// inode and a uid that is not a desktop's. Anything else (TIME_WAIT,
// FIN_WAIT2, inode 0, not found, a netlink error) fails closed and counts
// as a desktop. A connection through a Unix socket is its peer's uid, as
// SO_PEERCRED recorded it at connect. Peers on other hosts keep the
// ordinary rules.
package connid

import (
	"fmt"
	"net"
	"net/netip"
	"os"
)

// Kind is what a Verdict found the peer to be.
type Kind int

// The kinds of peer, from most to least trusted.
const (
	// Remote is a peer on another host (or in another network namespace):
	// its address decides, as for any client.
	Remote Kind = iota
	// Host is a process of this host whose owner is known and is no
	// desktop (e.g. tailscaled, nginx, a browser).
	Host
	// Desktop is a process of a local desktop, or one that may be (its
	// user-mode network stack).
	Desktop
	// Unknown is a connection from this host whose owner could not be
	// established: treated as a desktop.
	Unknown
)

// String names k for logs and tests.
func (k Kind) String() string {
	switch k {
	case Remote:
		return "remote"
	case Host:
		return "host"
	case Desktop:
		return "desktop"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// HostPrefix is a prefix the kernel delivers to this host, and the
// device its route names.
type HostPrefix struct {
	Prefix netip.Prefix
	Dev    string
}

// Verdict is what Classify found out about one connection.
type Verdict struct {
	Kind Kind
	// Addr is the peer's address (TCP; invalid for a Unix socket).
	Addr netip.Addr
	// Unix is set for a connection through a Unix socket.
	Unix bool
	// UID is the peer's owner when Owned.
	UID   int
	Owned bool
	// Reason says why a connection is Unknown or Desktop, for the log.
	Reason string
}

// Untrusted reports whether the connection must get no trust from its
// address or socket: it is, or may be, from a desktop.
func (v Verdict) Untrusted() bool { return v.Kind == Desktop || v.Kind == Unknown }

// Config says which uids are desktops'.
type Config struct {
	// Desktop reports whether uid is a local desktop's (local.Sandbox's
	// Owns); nil: no uid is.
	Desktop func(uid int) bool
	// SharedUID, when set, is that desktops run as the portal's own uid
	// (user namespaces, a portal that is not root): their user-mode
	// network stacks then open host sockets as this process's uid, so a
	// connection of that uid from a host address other than loopback
	// (which those stacks cannot reach) is counted as a desktop's.
	SharedUID bool
}

// Classifier classifies connections by Config.
type Classifier struct {
	desktop func(int) bool
	shared  bool
	self    int
	lookup  func(peer, local netip.AddrPort) (sock, error)
	isHost  func(netip.Addr) (bool, error)
}

// New returns a Classifier for cfg.
func New(cfg Config) *Classifier {
	c := &Classifier{desktop: cfg.Desktop, shared: cfg.SharedUID, self: os.Geteuid(), lookup: lookupSocket, isHost: isHostAddr}
	if c.desktop == nil {
		c.desktop = func(int) bool { return false }
	}
	return c
}

// Classify says who opened c. It makes one or two netlink round trips
// for a TCP connection: run it off the accept loop (Listener does).
func (c *Classifier) Classify(conn net.Conn) Verdict {
	if uc, ok := conn.(*net.UnixConn); ok {
		return c.classifyUnix(uc)
	}
	remote, ok1 := tcpAddrPort(conn.RemoteAddr())
	local, ok2 := tcpAddrPort(conn.LocalAddr())
	if !ok1 || !ok2 {
		return Verdict{Kind: Unknown, Reason: fmt.Sprintf("not a TCP or Unix connection (%T)", conn)}
	}
	return c.classifyTCP(remote, local)
}

func (c *Classifier) classifyTCP(remote, local netip.AddrPort) Verdict {
	ra := remote.Addr().Unmap()
	v := Verdict{Addr: ra}
	if !ra.IsLoopback() && !ra.IsLinkLocalUnicast() {
		host, err := c.isHost(ra)
		if err == nil && !host {
			v.Kind = Remote
			return v
		}
		if err != nil {
			v.Reason = "route lookup: " + err.Error() + "; "
		}
	}
	s, err := c.lookup(remote, local)
	switch {
	case err != nil:
		v.Kind, v.Reason = Unknown, v.Reason+"sock_diag: "+err.Error()
		return v
	case !s.found:
		v.Kind, v.Reason = Unknown, v.Reason+"the peer's socket is gone (reset or closed)"
		return v
	case s.inode == 0:
		v.Kind, v.Reason = Unknown, fmt.Sprintf("the peer's socket is %s with no owner (closed)", stateName(s.state))
		return v
	}
	v.UID, v.Owned = int(s.uid), true
	switch {
	case c.desktop(v.UID):
		v.Kind, v.Reason = Desktop, fmt.Sprintf("uid %d is a desktop's", v.UID)
	case s.state != tcpEstablished:
		v.Kind, v.Reason = Unknown, fmt.Sprintf("the peer's socket is %s, not ESTABLISHED", stateName(s.state))
	case c.shared && v.UID == c.self && !ra.IsLoopback():
		v.Kind, v.Reason = Desktop, fmt.Sprintf("uid %d (the portal's) from host address %s may be a desktop's network stack", v.UID, ra)
	default:
		v.Kind = Host
	}
	return v
}

func (c *Classifier) classifyUnix(uc *net.UnixConn) Verdict {
	v := Verdict{Unix: true}
	uid, err := PeerUID(uc)
	if err != nil {
		v.Kind, v.Reason = Unknown, "SO_PEERCRED: "+err.Error()
		return v
	}
	v.UID, v.Owned = uid, true
	if c.desktop(uid) {
		v.Kind, v.Reason = Desktop, fmt.Sprintf("uid %d is a desktop's", uid)
		return v
	}
	v.Kind = Host
	return v
}

// sock is what sock_diag says about one TCP socket.
type sock struct {
	found bool
	state uint8
	uid   uint32
	inode uint32
}

// tcpEstablished is TCP_ESTABLISHED (include/net/tcp_states.h).
const tcpEstablished = 1

func stateName(s uint8) string {
	names := []string{1: "ESTABLISHED", "SYN_SENT", "SYN_RECV", "FIN_WAIT1", "FIN_WAIT2", "TIME_WAIT", "CLOSE", "CLOSE_WAIT", "LAST_ACK", "LISTEN", "CLOSING", "NEW_SYN_RECV"}
	if int(s) < len(names) && names[s] != "" {
		return names[s]
	}
	return fmt.Sprintf("state %d", s)
}

// tcpAddrPort returns a's address and port, or false when a is not TCP.
func tcpAddrPort(a net.Addr) (netip.AddrPort, bool) {
	t, ok := a.(*net.TCPAddr)
	if !ok {
		return netip.AddrPort{}, false
	}
	return t.AddrPort(), true
}
