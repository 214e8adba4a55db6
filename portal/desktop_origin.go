package portal

import (
	"context"
	"log/slog"
	"net"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/local"
)

// A local desktop can reach the portal's listen address over loopback like
// any browser on this host. Its requests must not get the trust loopback
// otherwise earns (the Tailscale proxy rule, sign-in by name), so every
// connection from this host is attributed to its owner: the kernel's
// socket table names the uid of the process that opened the peer socket,
// which a desktop cannot forge (its processes all run as its own uid).
// A loopback peer that cannot be attributed (its socket is already gone, or
// /proc is unreadable) is treated as a desktop: fail closed. Peers on other
// hosts are not in the table and keep the ordinary rules.

// desktopConnContext marks the context of connections whose peer runs as
// a desktop uid of sandbox (nil: no desktop uids, only the fail-closed
// rule applies). The first loopback peer it cannot attribute is logged.
func desktopConnContext(sandbox *local.Sandbox, log *slog.Logger) func(context.Context, net.Conn) context.Context {
	var once sync.Once
	return func(ctx context.Context, c net.Conn) context.Context {
		desktop, unknown := fromDesktop(c, sandbox)
		if unknown {
			once.Do(func() {
				log.Warn("a loopback connection's owner is not in the kernel's socket table (/proc/net/tcp); treating such connections as from a desktop: no Tailscale identity, no sign-in by name", "remote", c.RemoteAddr().String())
			})
		}
		if desktop {
			return auth.WithFromDesktop(ctx)
		}
		return ctx
	}
}

// fromDesktop reports whether c was opened by a desktop, or (unknown) is
// a loopback connection the socket table does not name.
func fromDesktop(c net.Conn, sandbox *local.Sandbox) (desktop, unknown bool) {
	remote, ok := tcpAddrPort(c.RemoteAddr())
	if !ok {
		return false, false
	}
	here, ok := tcpAddrPort(c.LocalAddr())
	if !ok {
		return false, false
	}
	loop := remote.Addr().Unmap().IsLoopback()
	// A connection from this host to one of its own addresses has that
	// address as its source too; anything else comes from another host and
	// is not worth the lookup (a few ms with hundreds of sockets).
	if !loop && remote.Addr().Unmap() != here.Addr().Unmap() {
		return false, false
	}
	uid, found, err := localSocketOwner(remote, here)
	if err != nil || !found {
		return loop, loop
	}
	return sandbox.Owns(uid), false
}
