package kube

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
)

// A golden VM's snapshot outlives its clones until every PVC restored from
// it is Bound: a restored PVC is provisioned from the snapshot's
// VolumeSnapshots, and on a WaitForFirstConsumer class (most cloud CSI)
// that happens only when its member first starts. KubeVirt's own clone
// waits the same way (pkg/virt-controller/watch/clone, verifyPVCBound).
// So the last user of a snapshot waits a little (BindWait) for the
// restored disks to bind (not for those that wait for their first
// consumer), and leaves the snapshot when some still wait;
// the next snapshot of the same golden VM deletes the ones left that no
// disk and no unfinished clone needs any more (sweepSnapshots).

// BindWait bounds how long the last user of a golden VM's snapshot waits
// for the disks restored from it to be Bound before leaving it for a later
// sweep.
const BindWait = 30 * time.Second

// restoresPending reports whether a PVC in namespace restored from the
// VirtualMachineSnapshot with uid is not Bound yet, and whether one of
// those may bind soon (not a WaitForFirstConsumer PVC that no node has
// been picked for).
func (v *VMs) restoresPending(ctx context.Context, namespace string, uid types.UID) (pending, soon bool, err error) {
	list, err := v.addrs.core.PersistentVolumeClaims(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, false, err
	}
	pending, soon = v.pendingOf(ctx, list.Items, uid)
	return pending, soon, nil
}

// pendingOf is restoresPending over pvcs, the namespace's PVCs. KubeVirt
// names the VolumeSnapshots of a VM snapshot vmsnapshot-<uid>-volume-<volume>
// (pkg/storage/snapshot/snapshot.go), and a restored PVC names its
// VolumeSnapshot as its dataSource.
func (v *VMs) pendingOf(ctx context.Context, pvcs []corev1.PersistentVolumeClaim, uid types.UID) (pending, soon bool) {
	prefix := "vmsnapshot-" + string(uid) + "-volume-"
	for _, pvc := range pvcs {
		src := pvc.Spec.DataSource
		if src == nil || src.Kind != "VolumeSnapshot" || !strings.HasPrefix(src.Name, prefix) ||
			pvc.DeletionTimestamp != nil || pvc.Status.Phase == corev1.ClaimBound {
			continue
		}
		pending = true
		if !v.waitsForConsumer(ctx, &pvc) {
			soon = true
		}
	}
	return pending, soon
}

// waitsForConsumer reports whether pvc binds only once a Pod that uses it
// is scheduled, and none is yet.
func (v *VMs) waitsForConsumer(ctx context.Context, pvc *corev1.PersistentVolumeClaim) bool {
	if pvc.Annotations["volume.kubernetes.io/selected-node"] != "" || pvc.Spec.StorageClassName == nil {
		return false
	}
	sc, err := v.storage.StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
	return err == nil && sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer
}

// releaseSnapshot deletes a snapshot no clone of this process needs any
// more, once the disks restored from it are Bound (waiting up to
// BindWait on a watch of the namespace's PVCs); otherwise it is left for
// sweepSnapshots.
func (v *VMs) releaseSnapshot(ctx context.Context, namespace, name string, uid types.UID) {
	pvcs := v.addrs.core.PersistentVolumeClaims(namespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pvcs.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pvcs.Watch(ctx, o)
		},
	}
	pending := true
	settled := func(store cache.Store) bool {
		var items []corev1.PersistentVolumeClaim
		for _, o := range store.List() {
			items = append(items, *o.(*corev1.PersistentVolumeClaim))
		}
		p, soon := v.pendingOf(ctx, items, uid)
		pending = p
		// Disks waiting for their first consumer bind when their members
		// first start, not in the next seconds: leave them to a sweep.
		return !pending || !soon
	}
	wctx, cancel := context.WithTimeout(ctx, BindWait)
	defer cancel()
	// Without watch on PVCs the wait ends at once: a sweep deletes it.
	rctx, refuse := context.WithCancelCause(wctx)
	defer refuse(nil)
	var st cache.Store
	_, _ = watchtools.UntilWithSync(rctx, refusing(lw, namespace, refuse), &corev1.PersistentVolumeClaim{},
		func(store cache.Store) (bool, error) {
			st = store
			return settled(store), nil
		},
		func(watch.Event) (bool, error) { return settled(st), nil })
	if !pending {
		v.deleteSnapshot(ctx, namespace, name)
	}
}

// sweepSnapshots deletes the portal's snapshots of golden left behind
// (their disks were waiting to bind, or a clone was unfinished) that no
// PVC waits for and no unfinished clone reads, except inUse.
func (v *VMs) sweepSnapshots(ctx context.Context, namespace, golden, inUse string) {
	var list snapshotv1beta1.VirtualMachineSnapshotList
	if v.snap.Get().Namespace(namespace).Resource("virtualmachinesnapshots").
		VersionedParams(&metav1.ListOptions{LabelSelector: LabelSnapshotOf + "=" + golden}, metav1.ParameterCodec).Do(ctx).Into(&list) != nil {
		return
	}
	var clones clonev1beta1.VirtualMachineCloneList
	if len(list.Items) > 0 && v.clone.Get().Namespace(namespace).Resource("virtualmachineclones").Do(ctx).Into(&clones) != nil {
		return
	}
	for _, sn := range list.Items {
		if sn.Name == inUse || sn.DeletionTimestamp != nil || sn.Status == nil || sn.Status.ReadyToUse == nil || !*sn.Status.ReadyToUse {
			continue // in use here, going, or still being taken (perhaps by another replica)
		}
		reading := false
		for _, c := range clones.Items {
			if c.Spec.Source != nil && c.Spec.Source.Name == sn.Name && c.Status.Phase != clonev1beta1.Succeeded && c.Status.Phase != clonev1beta1.Failed {
				reading = true
			}
		}
		if reading {
			continue
		}
		if pending, _, err := v.restoresPending(ctx, namespace, sn.UID); err == nil && !pending {
			v.deleteSnapshot(ctx, namespace, sn.Name)
		}
	}
}
