package vdi

import "context"

// A user's claim lock orders her claims across replicas, but a replica
// that takes it lists Leases from a cache (the kube backend's watch) that
// may not show yet what her last claim wrote on another replica a moment
// before: it would find her desktop free and give her a second one. So
// the claim's reads after the lock carry the lock Lease's
// resourceVersion, and a store whose List reads a cache shows at least
// every write before it: it waits until its cache is that new, or reads
// past the cache.

// readAfterKey is the context key of WithReadAfter.
type readAfterKey struct{}

// WithReadAfter returns ctx whose Lease reads must show every write made
// before resourceVersion rv (the store's own, e.g. a claim lock's); ctx
// itself when rv is empty.
func WithReadAfter(ctx context.Context, rv string) context.Context {
	if rv == "" {
		return ctx
	}
	return context.WithValue(ctx, readAfterKey{}, rv)
}

// ReadAfter returns the resourceVersion ctx's Lease reads must show every
// write before, "" when any may do (WithReadAfter).
func ReadAfter(ctx context.Context) string {
	rv, _ := ctx.Value(readAfterKey{}).(string)
	return rv
}
