package auth

import "context"

// desktopKey is the context key that marks a request made from inside a
// local desktop.
type desktopKey struct{}

// WithFromDesktop returns ctx marked as carrying a request that started
// inside a local desktop, or may have: the listener found the
// connection's peer socket owned by a desktop uid, or could not name its
// owner at all (package connid fails closed). Such a request never gets the trusted-proxy
// rule (its Tailscale headers are ignored) nor a sign-in by name: a
// desktop's user may reach the portal's loopback address like a browser,
// but must not claim to be someone else from there.
func WithFromDesktop(ctx context.Context) context.Context {
	return context.WithValue(ctx, desktopKey{}, true)
}

// FromDesktop reports whether ctx was marked by WithFromDesktop.
func FromDesktop(ctx context.Context) bool {
	v, _ := ctx.Value(desktopKey{}).(bool)
	return v
}

// proxyPeerKey is the context key that marks a request through a Unix
// socket whose peer the listener checked.
type proxyPeerKey struct{}

// WithProxyPeer returns ctx marked as carrying a request from a proxy on
// this host that connected through the portal's Unix socket, and whose
// uid (SO_PEERCRED) is no desktop's. Such a peer is a trusted proxy like
// a loopback address in the trusted-proxy list: its Tailscale headers are
// believed. Only the Unix listener may set it.
func WithProxyPeer(ctx context.Context) context.Context {
	return context.WithValue(ctx, proxyPeerKey{}, true)
}

// ProxyPeer reports whether ctx was marked by WithProxyPeer.
func ProxyPeer(ctx context.Context) bool {
	v, _ := ctx.Value(proxyPeerKey{}).(bool)
	return v
}
