package kube

import (
	"context"
	"encoding/json"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A claim whose replica's cache lags reads its user's Leases past the
// cache by their holder label (read_after.go), which every Lease this
// release writes carries. A Lease an earlier release wrote has none, or,
// when an earlier release's update gave it a new holder, the old one's
// (its merge patch leaves labels it does not name): such a read would
// miss it. So every replica gives the Leases its cache shows the label
// of their holder: those there at its start (the cache's first events)
// and those an earlier release's replicas write during a rolling update.
// Each is one patch guarded by the resourceVersion the cache showed, so
// replicas racing on one Lease write it once (the others' patches are
// refused as conflicts, and their caches then show it labelled), and a
// claim's own write in between wins over the label's. Once no earlier
// release writes, nothing here writes.

// holderLabelWrong reports whether o lacks its holder's label.
func holderLabelWrong(o *coordinationv1.Lease) (want string, wrong bool) {
	holder := ""
	if o.Spec.HolderIdentity != nil {
		holder = *o.Spec.HolderIdentity
	}
	want = vdi.HolderLabel(holder)
	return want, o.Labels[vdi.LabelHolder] != want
}

// labelHolders queues every Lease the cache shows without its holder's
// label, for labelQueued.
func (l *Leases) labelHolders() {
	l.unlabelled = workqueue.NewTyped[string]()
	on := func(obj any) {
		if o, ok := obj.(*coordinationv1.Lease); ok {
			if _, wrong := holderLabelWrong(o); wrong {
				l.unlabelled.Add(o.Namespace + "/" + o.Name)
			}
		}
	}
	if _, err := l.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, o any) { on(o) },
	}); err != nil {
		panic(err) // only fails once the informer stopped
	}
}

// labelQueued labels the queued Leases, one at a time, until ctx ends.
func (l *Leases) labelQueued(ctx context.Context) {
	go func() {
		<-ctx.Done()
		l.unlabelled.ShutDown()
	}()
	for {
		key, stop := l.unlabelled.Get()
		if stop {
			return
		}
		l.labelHolder(ctx, key)
		l.unlabelled.Done(key)
	}
}

// labelHolder gives the Lease key its holder's label, if the cache still
// shows it without, by a patch at the resourceVersion the cache shows.
// A conflict or a Lease gone means another write came first: the cache's
// next event of it queues it again if that write did not label it.
func (l *Leases) labelHolder(ctx context.Context, key string) {
	obj, ok, _ := l.informer.GetIndexer().GetByKey(key)
	if !ok {
		return
	}
	o := obj.(*coordinationv1.Lease)
	want, wrong := holderLabelWrong(o)
	if !wrong {
		return
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"resourceVersion": o.ResourceVersion,
		"labels":          map[string]string{vdi.LabelHolder: want},
	}})
	if err != nil {
		panic(err) // strings only
	}
	_, err = l.client.CoordinationV1().Leases(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		l.log.Warn("lease not given its holder's label; a claim on a replica whose cache lags may not see it", "lease", key, "err", err)
	}
}
