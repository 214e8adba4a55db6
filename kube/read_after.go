package kube

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
)

// readAfterWait is how long List waits for its cache to show a write it
// must read after (vdi.ReadAfter) before it asks the apiserver instead.
// The cache that watches the claim lock's namespace too (the portal over
// every namespace) sees the lock itself within a watch's delay; one that
// does not (a pool namespace of its own) sees it only when a later write
// there comes, and reads the apiserver after this long.
const readAfterWait = 50 * time.Millisecond

// seen is the newest resourceVersion the cache shows: resourceVersions
// come from the one etcd, so they order writes across namespaces, and a
// watch delivers its writes in that order, so a cache that shows one
// write shows every write before it that it watches.
type seen struct {
	mu      sync.Mutex
	rv      string
	changed chan struct{} // closed and replaced on every newer rv
}

// follow makes s follow inf's events, which come after the cache took
// them in.
func (s *seen) follow(inf cache.SharedIndexInformer) {
	s.changed = make(chan struct{})
	on := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(*coordinationv1.Lease); ok {
			s.saw(o.ResourceVersion)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, o any) { on(o) },
		DeleteFunc: on,
	}); err != nil {
		panic(err) // only fails once the informer stopped
	}
}

func (s *seen) saw(rv string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if newer(rv, s.rv) {
		s.rv = rv
		close(s.changed)
		s.changed = make(chan struct{})
	}
}

// reached reports whether the cache shows the write at rv ("" : any),
// waiting up to readAfterWait for it.
func (s *seen) reached(ctx context.Context, rv string) bool {
	if rv == "" {
		return true
	}
	timeout := time.NewTimer(readAfterWait)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		ok, changed := !newer(rv, s.rv), s.changed
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-changed:
		case <-timeout.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}
