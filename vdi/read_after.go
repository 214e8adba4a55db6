package vdi

import (
	"context"
	"sync"
)

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

// readAfter is the newest write a claim's reads must show: the lock's at
// first, then what a read past the cache showed (ReadPast), so that a
// later read never shows less than an earlier one.
type readAfter struct {
	mu sync.Mutex
	rv string
}

// WithReadAfter returns ctx whose Lease reads must show every write made
// before resourceVersion rv (the store's own, e.g. a claim lock's); ctx
// itself when rv is empty.
func WithReadAfter(ctx context.Context, rv string) context.Context {
	if rv == "" {
		return ctx
	}
	return context.WithValue(ctx, readAfterKey{}, &readAfter{rv: rv})
}

// ReadAfter returns the resourceVersion ctx's Lease reads must show every
// write before, "" when any may do (WithReadAfter).
func ReadAfter(ctx context.Context) string {
	ra, _ := ctx.Value(readAfterKey{}).(*readAfter)
	if ra == nil {
		return ""
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	return ra.rv
}

// ReadPast records that a read of ctx showed every write up to rv, newer
// than ReadAfter(ctx) (the store compares its versions): ctx's later
// reads must show it too. Nothing when ctx has no WithReadAfter.
func ReadPast(ctx context.Context, rv string) {
	ra, _ := ctx.Value(readAfterKey{}).(*readAfter)
	if ra == nil {
		return
	}
	ra.mu.Lock()
	defer ra.mu.Unlock()
	ra.rv = rv
}
