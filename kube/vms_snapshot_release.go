package kube

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
)

// A golden VM's snapshot of an older state outlives its clones until
// every PVC restored from it is Bound: a restored PVC is provisioned from
// the snapshot's VolumeSnapshots, and on a WaitForFirstConsumer class
// (most cloud CSI) that happens only when its member first starts.
// KubeVirt's own clone waits the same way (pkg/virt-controller/watch/clone,
// verifyPVCBound). So a sweep (after a snapshot of a newer state is taken,
// or with the golden VM's last pool) deletes only the older snapshots that
// no disk waits for and no unfinished clone reads.

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
