package kube

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Other replicas' heartbeats are judged as client-go's leader election
// judges a lock: by when this replica saw one change (a new
// resourceVersion), on this replica's own monotonic clock, and the
// duration it states; never by the renewTime another replica wrote. So
// a replica whose clock runs minutes ahead neither takes a live
// replica's screens nor, minutes behind, keeps a dead one's: their
// clocks need not agree. A heartbeat first seen counts as renewed then
// (a replica that just started waits one heartbeat's life for a dead
// one, as a new leader-election candidate does); a watch of the
// heartbeats sees renewals as they happen, and every read feeds the
// same sightings, so a watch that lags cannot make a live one look
// dead.

// sighting is when this replica first saw a heartbeat's version.
type sighting struct {
	version string
	at      time.Time // on this replica's clock (monotonic)
}

// sightings keeps the heartbeats this replica has seen, by Lease name.
type sightings struct {
	now func() time.Time

	mu   sync.Mutex
	seen map[string]sighting
}

// alive records heartbeat l as seen now and reports whether it was
// renewed (its version changed) within its duration of this replica's
// clock.
func (s *sightings) alive(l *coordinationv1.Lease) bool {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]sighting{}
	}
	seen, ok := s.seen[l.Name]
	if !ok || seen.version != l.ResourceVersion {
		seen = sighting{version: l.ResourceVersion, at: now}
		s.seen[l.Name] = seen
	}
	if l.Spec.LeaseDurationSeconds == nil {
		return false
	}
	return now.Sub(seen.at) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second
}

// gone forgets heartbeat name: deleted, its replica stopped.
func (s *sightings) gone(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.seen, name)
}

// watch feeds the sightings with the heartbeats in namespace ns from a
// watch, until ctx ends.
func (s *sightings) watch(ctx context.Context, cs kubernetes.Interface, ns string) error {
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = labelScreenLease + "=replica" }))
	inf := factory.Coordination().V1().Leases().Informer()
	seen := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			s.alive(l)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    seen,
		UpdateFunc: func(_, obj any) { seen(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if l, ok := obj.(*coordinationv1.Lease); ok {
				s.gone(l.Name)
			}
		},
	}); err != nil {
		return err
	}
	go inf.Run(ctx.Done())
	return nil
}
