package vdi

import (
	"context"
	"net"
)

// Backend runs members: the local host or a Kubernetes cluster. Errors a
// user should see are *Error values (ENotFound for an unknown pool or member).
type Backend interface {
	Pools(ctx context.Context) ([]Pool, error)
	Pool(ctx context.Context, namespace, name string) (Pool, error)
	Members(ctx context.Context, namespace, pool string) ([]Member, error)
	Member(ctx context.Context, ref Ref) (Member, error)
	// Start powers a member on and returns once its consoles answer.
	Start(ctx context.Context, ref Ref) error
	// Stop powers a member off, keeping its disks or home.
	Stop(ctx context.Context, ref Ref) error
	// Recreate stops a member and makes it fresh from its pool's source.
	Recreate(ctx context.Context, ref Ref) error
	// Dial opens a byte stream to a running member's console. The target
	// comes from the backend's own records, never from a client.
	Dial(ctx context.Context, ref Ref, p Protocol) (net.Conn, error)
}

// MemberWalker is a Backend that shows a pool's members one at a time
// from its caches. A claim keeps a handful of a pool's members
// (claim_rank.go): a list of a morning's thousand is a copy of them all
// for nothing, at every claim.
type MemberWalker interface {
	// WalkMembers calls yield with each of the pool's members, as
	// Members lists them, until yield returns false.
	WalkMembers(ctx context.Context, namespace, pool string, yield func(Member) bool) error
}

// WalkMembers calls yield with each member of pool in b: through its
// WalkMembers where it has one, else over its Members.
func WalkMembers(ctx context.Context, b Backend, namespace, pool string, yield func(Member) bool) error {
	if w, ok := b.(MemberWalker); ok {
		return w.WalkMembers(ctx, namespace, pool, yield)
	}
	members, err := b.Members(ctx, namespace, pool)
	if err != nil {
		return err
	}
	for _, m := range members {
		if !yield(m) {
			break
		}
	}
	return nil
}

// Identity is who is asking: the Lease holder is the Login.
type Identity struct {
	Login  string
	Name   string
	Groups []string
	Admin  bool
	// Token, when set, is the personal access token the request came
	// with: the identity reaches only the pools it names.
	Token *TokenScope
}
