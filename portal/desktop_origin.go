package portal

import (
	"context"
	"log/slog"
	"net"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/local"
)

// A local desktop may reach the portal from this host like any browser
// (through its network stack, or over the host's network where desktops
// share it). Its requests must not get the trust this host otherwise
// earns (the Tailscale proxy rule, sign-in by name): package connid tells
// who opened each connection, positively or not at all, and connContext
// turns its verdict into the marks auth reads.

// classifier returns the connid.Classifier of this portal's desktops.
func classifier(sandbox *local.Sandbox) *connid.Classifier {
	cfg := connid.Config{SharedUID: sandbox.Namespaced()}
	if sandbox != nil {
		cfg.Desktop = sandbox.Owns
	}
	return connid.New(cfg)
}

// connContext marks the context of each connection by its verdict: one
// that is (or may be) from a desktop gets auth.WithFromDesktop, a Unix
// socket's peer that is no desktop auth.WithProxyPeer; a connection
// without a verdict fails closed. It reads what the listener found and
// does no I/O: it runs in http.Server's accept loop. The first connection
// whose owner could not be established is logged, with why.
func connContext(log *slog.Logger) func(context.Context, net.Conn) context.Context {
	var once sync.Once
	return func(ctx context.Context, c net.Conn) context.Context {
		v, ok := connid.VerdictOf(c)
		switch {
		case !ok:
			return auth.WithFromDesktop(ctx)
		case v.Kind == connid.Unknown:
			once.Do(func() {
				log.Warn("a connection from this host has no owner the kernel can name; treating such connections as from a desktop: no Tailscale identity, no sign-in by name", "remote", c.RemoteAddr().String(), "why", v.Reason)
			})
			return auth.WithFromDesktop(ctx)
		case v.Untrusted():
			return auth.WithFromDesktop(ctx)
		case v.Unix:
			return auth.WithProxyPeer(ctx)
		}
		return ctx
	}
}
