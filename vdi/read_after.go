package vdi

import "context"

// A user's claim lock orders her claims across replicas, but a replica
// that takes it lists Leases from a cache (the kube backend's watch) that
// may not show yet what her last claim wrote on another replica a moment
// before: it would find her desktop free and give her a second one. So
// the claim's reads after the lock carry the lock Lease's
// resourceVersion and her login, and a store whose List reads a cache
// that does not show that version yet reads her Leases past the cache
// (by their LabelHolder). Only hers: another user's Lease the cache
// misses costs the claim a lost race at most, never a rule.

// UnknownVersion stands for the resourceVersion of a write whose answer
// was lost (the store went away while it wrote): it may have been made or
// not, and a cache may not show it for a while. Reads after it
// (WithReadAfter) read the holder's Leases past any cache, as the store
// has them now.
const UnknownVersion = "unknown"

// readAfterKey is the context key of WithReadAfter.
type readAfterKey struct{}

// readAfter is a write a context's reads must show, with every write
// before it, and whose Leases may not be missed.
type readAfter struct{ rv, holder string }

// WithReadAfter returns ctx whose Lease reads must show holder's Leases
// as of every write made before resourceVersion rv (the store's own, e.g.
// a claim lock's); ctx itself when rv is empty.
func WithReadAfter(ctx context.Context, rv, holder string) context.Context {
	if rv == "" {
		return ctx
	}
	return context.WithValue(ctx, readAfterKey{}, readAfter{rv, holder})
}

// ReadAfter returns the resourceVersion ctx's Lease reads must show
// holder's Leases as of, "" when any read may do (WithReadAfter).
func ReadAfter(ctx context.Context) (rv, holder string) {
	ra, _ := ctx.Value(readAfterKey{}).(readAfter)
	return ra.rv, ra.holder
}
