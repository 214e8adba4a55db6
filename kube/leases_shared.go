package kube

import (
	"strings"
	"sync"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Every claim lists its pool's Leases, and in a morning storm a pool has
// a thousand: converting each object to a vdi.Lease on every List (an
// allocation, its annotations cloned, its fields checked) was a third of
// a claim's CPU in process. List therefore converts each object version
// once and hands the same vdi.Lease to every caller, who only reads it
// (vdi.Leases.List); the tests check at their end that no caller changed
// one (unchanged, export_test.go).

// leaseKey names a Lease object; a struct, so that a lookup builds no
// string.
type leaseKey struct{ namespace, name string }

func keyOf(o *coordinationv1.Lease) leaseKey { return leaseKey{o.Namespace, o.Name} }

// sharedCap bounds the conversions kept (about 300 bytes each, beside the
// cache's own 1 KB an object): a Lease converted just after its delete was
// seen is never forgotten otherwise.
const sharedCap = 1 << 16

// shared keeps List's conversions, one per Lease object, at the
// resourceVersion last converted (which names one content of the object).
type shared struct {
	mu    sync.RWMutex
	byKey map[leaseKey]conversion
}

// conversion is a Lease object and what fromKube made of it.
type conversion struct {
	obj   *coordinationv1.Lease
	lease *vdi.Lease
}

// forget drops the conversions of the Leases inf deletes.
func (s *shared) forget(inf cache.SharedIndexInformer) {
	s.byKey = map[leaseKey]conversion{}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if o, ok := obj.(*coordinationv1.Lease); ok {
			s.mu.Lock()
			delete(s.byKey, keyOf(o))
			s.mu.Unlock()
		}
	}}); err != nil {
		panic(err) // only fails once the informer stopped
	}
}

// leases returns the claims objs record (the claim Leases among them),
// each converted by convert once per resourceVersion and shared.
func (s *shared) leases(objs []*coordinationv1.Lease, convert func(*coordinationv1.Lease) *vdi.Lease) []*vdi.Lease {
	out := make([]*vdi.Lease, 0, len(objs))
	type miss struct {
		at  int // in out
		obj *coordinationv1.Lease
	}
	var missed []miss
	s.mu.RLock()
	for _, o := range objs {
		if !strings.HasPrefix(o.Name, vdi.LeasePrefix) {
			continue
		}
		if c, ok := s.byKey[keyOf(o)]; ok && (c.obj == o || c.obj.ResourceVersion == o.ResourceVersion) {
			out = append(out, c.lease)
			continue
		}
		missed = append(missed, miss{len(out), o})
		out = append(out, nil)
	}
	s.mu.RUnlock()
	if len(missed) == 0 {
		return out
	}
	made := make([]conversion, len(missed))
	for i, m := range missed {
		made[i] = conversion{m.obj, convert(m.obj)}
		out[m.at] = made[i].lease
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byKey) > sharedCap {
		clear(s.byKey) // converted again as they are listed
	}
	for _, c := range made {
		s.byKey[keyOf(c.obj)] = c
	}
	return out
}
