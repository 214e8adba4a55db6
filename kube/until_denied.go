package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// denied returns the error of a wait in namespace that may not verb (list
// or watch) what the refusal err names: it does not mend by waiting, so
// it names the verb, the resource and the namespace to grant.
func denied(verb, namespace string, err error) *vdi.Error {
	resource := "the resource it waits for"
	if st, ok := err.(apierrors.APIStatus); ok {
		if d := st.Status().Details; d != nil && d.Kind != "" {
			resource = d.Kind
			if d.Group != "" {
				resource += "." + d.Group
			}
		}
	}
	return &vdi.Error{Code: vdi.EUnavailable, Err: err,
		Msg: fmt.Sprintf("The portal may not %s %s in namespace %s, so it cannot wait for the change it asked for (the request itself was sent).",
			verb, resource, namespace),
		Hint: fmt.Sprintf("Grant the verb %q on %q in namespace %s to the portal's Role or ClusterRole (deploy/rbac.yaml has every verb it needs), then try again.",
			verb, resource, namespace)}
}

// refusingLW is a ListerWatcher whose list or watch refused by RBAC ends
// the wait it serves at once (refuse), naming the verb to grant, where
// the reflector would retry until the wait's deadline.
type refusingLW struct {
	lw        cache.ListerWatcherWithContext
	namespace string
	refuse    context.CancelCauseFunc
}

var _ cache.ListerWatcherWithContext = (*refusingLW)(nil)

// refusing wraps lw, which lists and watches in namespace, so that a
// Forbidden list or watch calls refuse with the error saying so.
func refusing(lw cache.ListerWatcher, namespace string, refuse context.CancelCauseFunc) *refusingLW {
	return &refusingLW{lw: cache.ToListerWatcherWithContext(lw), namespace: namespace, refuse: refuse}
}

// ListWithContext lists through the wrapped ListerWatcher.
func (r *refusingLW) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	obj, err := r.lw.ListWithContext(ctx, o)
	if apierrors.IsForbidden(err) {
		r.refuse(denied("list", r.namespace, err))
	}
	return obj, err
}

// WatchWithContext watches through the wrapped ListerWatcher.
func (r *refusingLW) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	wi, err := r.lw.WatchWithContext(ctx, o)
	if apierrors.IsForbidden(err) {
		r.refuse(denied("watch", r.namespace, err))
	}
	return wi, err
}

// List is ListWithContext without a context, for cache.ListerWatcher.
func (r *refusingLW) List(o metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), o)
}

// Watch is WatchWithContext without a context, for cache.ListerWatcher.
func (r *refusingLW) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), o)
}
