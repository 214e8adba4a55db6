package auth

import "context"

// desktopKey is the context key that marks a request made from inside a
// local desktop.
type desktopKey struct{}

// WithFromDesktop returns ctx marked as carrying a request that started
// inside a local desktop (the listener found the connection's peer socket
// owned by a desktop uid). Such a request never gets the trusted-proxy
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
