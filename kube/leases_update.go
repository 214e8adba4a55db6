package kube

import (
	"context"
	"encoding/json"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Update replaces the member's Lease if in.ResourceVersion is current;
// vdi.ErrConflict when it is stale, empty, or the Lease is gone.
//
// It is a JSON merge patch carrying the resourceVersion, not a PUT: the
// apiserver creates a Lease that a PUT names but that does not exist
// (leases allow create-on-update), so a renewal racing a release would
// bring a released claim back. A patch never creates.
func (l *Leases) Update(ctx context.Context, in *vdi.Lease) (*vdi.Lease, error) {
	if in.ResourceVersion == "" {
		// An empty resourceVersion would make an unconditional write.
		return nil, fmt.Errorf("kube: update lease %s without a resource version: %w", in.Ref(), vdi.ErrConflict)
	}
	base, err := l.at(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("kube: update lease %s: %w", in.Ref(), err)
	}
	patch, err := mergePatch(base, toKube(in))
	if err != nil {
		return nil, fmt.Errorf("kube: update lease %s: %w", in.Ref(), err)
	}
	got, err := l.client.CoordinationV1().Leases(in.Namespace).Patch(ctx, vdi.LeasePrefix+in.Member, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("kube: update lease %s: %w: %w", in.Ref(), vdi.ErrConflict, err)
	} else if err != nil {
		return nil, fmt.Errorf("kube: update lease %s: %w", in.Ref(), err)
	}
	l.remember(got.Namespace, got.Name, got.ResourceVersion, got)
	return l.fromKube(got), nil
}

// at returns the Lease object at in.ResourceVersion, from the cache when it
// has that version, else from the apiserver; vdi.ErrConflict when the Lease
// is gone or at another version already.
func (l *Leases) at(ctx context.Context, in *vdi.Lease) (*coordinationv1.Lease, error) {
	name := vdi.LeasePrefix + in.Member
	if obj, ok, _ := l.informer.GetIndexer().GetByKey(in.Namespace + "/" + name); ok {
		if o := obj.(*coordinationv1.Lease); o.ResourceVersion == in.ResourceVersion {
			return o, nil
		}
	}
	l.mu.Lock()
	w, ok := l.own[leaseKey{in.Namespace, name}]
	l.mu.Unlock()
	if ok && w.lease != nil && w.rv == in.ResourceVersion {
		return w.lease, nil
	}
	o, err := l.client.CoordinationV1().Leases(in.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %w", vdi.ErrConflict, err)
	} else if err != nil {
		return nil, err
	}
	if o.ResourceVersion != in.ResourceVersion {
		return nil, fmt.Errorf("%w: at resource version %s, not %s", vdi.ErrConflict, o.ResourceVersion, in.ResourceVersion)
	}
	return o, nil
}

// mergePatch turns base into want: the claim's labels, annotations (keys
// that are gone are set to null) and spec fields, with base's
// resourceVersion as the precondition. Other labels and spec fields stay.
func mergePatch(base, want *coordinationv1.Lease) ([]byte, error) {
	ann := map[string]any{}
	for k := range base.Annotations {
		ann[k] = nil
	}
	for k, v := range want.Annotations {
		ann[k] = v
	}
	return json.Marshal(map[string]any{
		"metadata": map[string]any{
			"resourceVersion": base.ResourceVersion,
			"labels":          want.Labels,
			"annotations":     ann,
		},
		"spec": map[string]any{
			"holderIdentity":       want.Spec.HolderIdentity,
			"leaseDurationSeconds": want.Spec.LeaseDurationSeconds,
			"acquireTime":          want.Spec.AcquireTime,
			"renewTime":            want.Spec.RenewTime,
		},
	})
}
