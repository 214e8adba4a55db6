package auth

import (
	"context"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// CLIPrefix starts the login of every admin CLI user (cli:root). Only a
// trusted identity may carry it: Identify refuses it from a header or a
// cookie, so that the audit log's cli: actors all came through the socket.
const CLIPrefix = "cli:"

// trustedKey is the context key of an identity the process vouches for.
type trustedKey struct{}

// WithTrustedIdentity returns ctx carrying id, which Identify then returns
// ahead of any header or cookie. Only a listener that authenticates its
// peers itself may set it: the admin socket does, from the kernel's peer
// credentials, on the requests it serves. Nothing a request carries can
// set a context value, so the TCP listener never yields this identity.
func WithTrustedIdentity(ctx context.Context, id vdi.Identity) context.Context {
	return context.WithValue(ctx, trustedKey{}, id)
}

// IsCLILogin reports whether login carries CLIPrefix in any letter case.
func IsCLILogin(login string) bool {
	return len(login) >= len(CLIPrefix) && strings.EqualFold(login[:len(CLIPrefix)], CLIPrefix)
}

// TrustedIdentity returns the identity WithTrustedIdentity put in ctx, and
// whether there is one: the request came through a listener that
// authenticated its peer itself (the admin socket), not from a browser.
func TrustedIdentity(ctx context.Context) (vdi.Identity, bool) {
	id, ok := ctx.Value(trustedKey{}).(vdi.Identity)
	return id, ok
}
