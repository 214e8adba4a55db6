package soak

// The kube phase's referee: a watch on the pool's Leases that counts
// double holders.

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// leaseWatcher watches a pool's Leases for the whole kube phase and counts
// double holders: a Lease handed from one holder to another without being
// released in between (none expire here: they last an hour), and a user
// holding two members of the pool at once. A Lease a release or reclaim
// has marked is no longer its holder's (#55: they may claim another while
// it is reset), so it counts for no one's two, though a hand-over of it is
// still a double.
type leaseWatcher struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	seen    map[string]seenLease // by Lease name
	events  int
	doubles int
	twice   int
}

func watchLeases(t *testing.T, cs kubernetes.Interface, ns, pool string) *leaseWatcher {
	ctx, cancel := context.WithCancel(context.Background())
	w := &leaseWatcher{cancel: cancel, done: make(chan struct{}), seen: map[string]seenLease{}}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			// List then watch from its version; after a broken watch (the
			// apiserver restarts) list again and carry on.
			list, err := cs.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + pool})
			if err != nil {
				time.Sleep(300 * time.Millisecond)
				continue
			}
			w.mu.Lock()
			listed := map[string]bool{}
			for i := range list.Items {
				w.observe(&list.Items[i], false)
				listed[list.Items[i].Name] = true
			}
			for name := range w.seen {
				if !listed[name] {
					delete(w.seen, name)
				}
			}
			w.mu.Unlock()
			wi, err := cs.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + pool,
				ResourceVersion: list.ResourceVersion})
			if err != nil {
				time.Sleep(300 * time.Millisecond)
				continue
			}
			for ev := range wi.ResultChan() {
				l, ok := ev.Object.(*coordinationv1.Lease)
				if !ok {
					continue
				}
				w.mu.Lock()
				w.events++
				if ev.Type == watch.Deleted {
					delete(w.seen, l.Name)
				} else {
					w.observe(l, true)
				}
				w.mu.Unlock()
			}
			wi.Stop()
		}
	}()
	return w
}

// seenLease is what the watcher last saw of a Lease: its holder, and
// whether a release or reclaim has marked it.
type seenLease struct {
	holder string
	marked bool
}

// observe takes in l's holder; w.mu is held.
func (w *leaseWatcher) observe(l *coordinationv1.Lease, live bool) {
	now := seenLease{marked: l.Annotations[vdi.AnnotationReclaiming] != ""}
	if l.Spec.HolderIdentity != nil {
		now.holder = *l.Spec.HolderIdentity
	}
	h := now.holder
	if prev := w.seen[l.Name].holder; live && prev != "" && h != "" && prev != h {
		w.doubles++
	}
	if h != "" && !now.marked {
		for name, other := range w.seen {
			if other.holder == h && name != l.Name && !other.marked {
				w.twice++
			}
		}
	}
	w.seen[l.Name] = now
}

// stop ends the watch and returns what it counted.
func (w *leaseWatcher) stop() (events, doubles, twice int) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.events, w.doubles, w.twice
}
