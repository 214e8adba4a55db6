package kube

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// readAfterWait is how long List waits for its cache to show a write it
// must read after (vdi.ReadAfter) before it reads the holder's Leases
// past the cache: a watch that keeps up shows the claim lock within a
// few milliseconds, and the read is one more request.
const readAfterWait = 10 * time.Millisecond

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

// reached reports whether the cache shows the write at rv ("": any),
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

// readPast returns the Leases in namespace (all when empty), of pool when
// pool is not empty, of holder when holder is not empty (LabelHolder), as
// the apiserver has them now.
func (l *Leases) readPast(ctx context.Context, namespace, pool, holder string) ([]*coordinationv1.Lease, error) {
	sel := vdi.LabelMember
	if pool != "" {
		sel += "," + vdi.LabelPool + "=" + pool
	}
	if holder != "" {
		sel += "," + vdi.LabelHolder + "=" + vdi.HolderLabel(holder)
	}
	list, err := l.client.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("kube: list leases in %q: %w", namespace, err)
	}
	objs := make([]*coordinationv1.Lease, len(list.Items))
	for i := range list.Items {
		objs[i] = &list.Items[i]
	}
	return objs, nil
}

// withFresh returns cached with fresh in place of the cache's copies of
// the same Leases, and those the cache does not show yet added.
func withFresh(cached, fresh []*coordinationv1.Lease) []*coordinationv1.Lease {
	if len(fresh) == 0 {
		return cached
	}
	byKey := make(map[leaseKey]*coordinationv1.Lease, len(fresh))
	for _, o := range fresh {
		byKey[keyOf(o)] = o
	}
	out := make([]*coordinationv1.Lease, 0, len(cached)+len(fresh))
	for _, o := range cached {
		key := keyOf(o)
		if f, ok := byKey[key]; ok {
			o = f
			delete(byKey, key)
		}
		out = append(out, o)
	}
	for _, o := range fresh {
		if _, ok := byKey[keyOf(o)]; ok {
			out = append(out, o)
		}
	}
	return out
}
