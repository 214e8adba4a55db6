package kube

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// until waits, within timeout, until done holds for the one object lw
// lists and watches in namespace (done gets nil when it does not exist), following a
// watch from the resourceVersion the first list returned
// (watchtools.UntilWithSync, which watches again after a break). It costs
// a list and a watch however long the wait, where a poll cost a read each
// time. done's error ends the wait with it; a timeout ends it with an
// error naming the timeout, and a list or watch RBAC refuses ends it at
// once with the verb to grant.
func until[T runtime.Object](ctx context.Context, timeout time.Duration, namespace string, lw cache.ListerWatcher, example T, done func(obj T) (bool, error)) error {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// The reflector under UntilWithSync retries a refused list or watch
	// until the deadline; a refusal by RBAC does not mend by waiting, so
	// it ends the wait at once.
	rctx, refuse := context.WithCancelCause(tctx)
	defer refuse(nil)
	var zero T
	_, err := watchtools.UntilWithSync(rctx, refusing(lw, namespace, refuse), example,
		func(store cache.Store) (bool, error) {
			if len(store.List()) == 0 {
				return done(zero)
			}
			return false, nil
		},
		func(ev watch.Event) (bool, error) {
			if ev.Type == watch.Deleted {
				return done(zero)
			}
			obj, ok := ev.Object.(T)
			if !ok {
				return false, nil // a bookmark or an error event: the watch goes on
			}
			return done(obj)
		})
	var refused *vdi.Error
	switch {
	case errors.As(context.Cause(rctx), &refused):
		return refused
	case err == nil || tctx.Err() == nil:
		return err
	case ctx.Err() != nil:
		return context.Cause(ctx)
	}
	return fmt.Errorf("%w after %v", context.DeadlineExceeded, timeout)
}

// one returns the ListWatch of one named object of resource through rc.
func one(rc rest.Interface, resource, namespace, name string) *cache.ListWatch {
	return cache.NewFilteredListWatchFromClient(rc, resource, namespace, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	})
}

// onePod returns the ListWatch of the Pod ref.
func onePod(cs kubernetes.Interface, ref vdi.Ref) *cache.ListWatch {
	sel := fields.OneTermEqualSelector("metadata.name", ref.Name).String()
	pods := cs.CoreV1().Pods(ref.Namespace)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = sel
			return pods.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = sel
			return pods.Watch(ctx, o)
		},
	}
}

// untilCached waits until done holds for namespace/name in w's cache (nil
// when it is not there), woken by the cache's events; when w does not
// serve reads (not started, broken, or behind this instance's write), it
// waits on a watch of the one object (fallback) instead.
func untilCached[T runtime.Object](ctx context.Context, timeout time.Duration, w *watched, namespace, name string,
	fallback func() cache.ListerWatcher, example T, done func(obj T) (bool, error)) error {
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var zero T
	for {
		if w == nil {
			break
		}
		next := w.next()
		st := w.store(namespace)
		if st == nil {
			break
		}
		obj, ok, err := st.GetByKey(namespace + "/" + name)
		if err != nil {
			return err
		}
		o := zero
		if ok {
			o = obj.(T)
		}
		if ok, err := done(o); ok || err != nil {
			return err
		}
		select {
		case <-next:
		case <-tctx.Done():
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("%w after %v", context.DeadlineExceeded, timeout)
		}
	}
	deadline, _ := tctx.Deadline()
	return until(ctx, time.Until(deadline), namespace, fallback(), example, done)
}

// untilVM waits until done holds for the VM ref (nil when there is none).
func (v *VMs) untilVM(ctx context.Context, timeout time.Duration, ref vdi.Ref, done func(*kubevirtv1.VirtualMachine) (bool, error)) error {
	return untilCached(ctx, timeout, v.cache, ref.Namespace, ref.Name,
		func() cache.ListerWatcher { return one(v.rest, "virtualmachines", ref.Namespace, ref.Name) }, &kubevirtv1.VirtualMachine{}, done)
}

// untilPod waits until done holds for the Pod ref (nil when there is none).
func (c *CTs) untilPod(ctx context.Context, timeout time.Duration, ref vdi.Ref, done func(*corev1.Pod) (bool, error)) error {
	return untilCached(ctx, timeout, c.podCache, ref.Namespace, ref.Name,
		func() cache.ListerWatcher { return onePod(c.cs, ref) }, &corev1.Pod{}, done)
}
