package testcluster

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TEST-ONLY: the disks a restore makes, as KubeVirt's VirtualMachineRestore
// does for a clone's target: a new PVC per disk of the source, named
// restore-<clone UID>-<volume>. A disk from the source's
// dataVolumeTemplates becomes a template of the target (its DataVolume,
// and so its PVC, is the target VM's: deleted with it); a plain
// persistentVolumeClaim volume is the target's only when the source VM
// owned the source PVC, and is otherwise nobody's, left behind when the
// target goes. There are no DataVolumes here (no CDI): the PVC stands for
// the DataVolume too. With no garbage collector in the test cluster, the
// stand-in deletes the PVCs whose owner VM is gone (gcDisks).

// pvcProtection is the finalizer the apiserver's admission puts on PVCs.
const pvcProtection = "kubernetes.io/pvc-protection"

// LabelRestoredDisk labels the PVCs the stand-in's restores make.
const LabelRestoredDisk = "corral.test/restored-disk"

// restoreDisks rewrites vm (the target, not yet created) to use new disks
// for img's volumes and returns the PVCs to create once vm exists, with
// whether each is vm's.
func (s *KubeVirtStandIn) restoreDisks(ctx context.Context, prefix string, img, vm *kubevirtv1.VirtualMachine) (pvcs []*corev1.PersistentVolumeClaim, owned []bool, err error) {
	if vm.Spec.Template == nil {
		return nil, nil, nil
	}
	for i := range vm.Spec.Template.Spec.Volumes {
		vol := &vm.Spec.Template.Spec.Volumes[i]
		name := prefix + "-" + vol.Name
		switch {
		case vol.DataVolume != nil:
			j := slices.IndexFunc(vm.Spec.DataVolumeTemplates, func(t kubevirtv1.DataVolumeTemplateSpec) bool { return t.Name == vol.DataVolume.Name })
			if j < 0 {
				continue // a DataVolume of its own: not restored here
			}
			vm.Spec.DataVolumeTemplates[j].Name, vol.DataVolume.Name = name, name
			pvcs, owned = append(pvcs, restoredPVC(vm.Namespace, name, prefix)), append(owned, true)
		case vol.PersistentVolumeClaim != nil:
			var src corev1.PersistentVolumeClaim
			own := false
			if err := s.cl.Get(ctx, client.ObjectKey{Namespace: vm.Namespace, Name: vol.PersistentVolumeClaim.ClaimName}, &src); err == nil {
				own = slices.ContainsFunc(src.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == img.UID })
			} else if !apierrors.IsNotFound(err) {
				return nil, nil, err
			}
			vol.PersistentVolumeClaim.ClaimName = name
			pvcs, owned = append(pvcs, restoredPVC(vm.Namespace, name, prefix)), append(owned, own)
		}
	}
	return pvcs, owned, nil
}

func restoredPVC(ns, name, restore string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{LabelRestoredDisk: "true"},
		Annotations: map[string]string{"restore.kubevirt.io/name": restore}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
}

// createDisks creates pvcs, those owned by vm with vm as their owner.
func (s *KubeVirtStandIn) createDisks(ctx context.Context, vm *kubevirtv1.VirtualMachine, pvcs []*corev1.PersistentVolumeClaim, owned []bool) error {
	for i, pvc := range pvcs {
		if owned[i] {
			yes := true
			pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine",
				Name: vm.Name, UID: vm.UID, Controller: &yes, BlockOwnerDeletion: &yes}}
		}
		if err := s.cl.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) { // made on an earlier pass
			return fmt.Errorf("restore disk %s: %w", pvc.Name, err)
		}
	}
	return nil
}

// gcDisks deletes the restored PVCs whose owner VM is gone, as the
// garbage collector would, and lets deleted ones go as the pvc-protection
// controller would.
func (s *KubeVirtStandIn) gcDisks(ctx context.Context) {
	var pvcs corev1.PersistentVolumeClaimList
	if err := s.cl.List(ctx, &pvcs, client.HasLabels{LabelRestoredDisk}); err != nil {
		return
	}
	alive := map[types.UID]bool{}
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if pvc.DeletionTimestamp != nil {
			// No Pod mounts it (launcher Pods here have no volumes): the
			// pvc-protection controller would let it go.
			if slices.Contains(pvc.Finalizers, pvcProtection) {
				patch := []byte(`{"metadata":{"finalizers":null}}`)
				if err := s.cl.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					s.logf("release PVC %s/%s: %v", pvc.Namespace, pvc.Name, err)
				}
			}
			continue
		}
		for _, o := range pvc.OwnerReferences {
			if o.Kind != "VirtualMachine" {
				continue
			}
			ok, seen := alive[o.UID]
			if !seen {
				var vm kubevirtv1.VirtualMachine
				err := s.cl.Get(ctx, client.ObjectKey{Namespace: pvc.Namespace, Name: o.Name}, &vm)
				ok = err == nil && vm.UID == o.UID || err != nil && !apierrors.IsNotFound(err)
				alive[o.UID] = ok
			}
			if !ok {
				if err := s.cl.Delete(ctx, pvc); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
					s.logf("collect PVC %s/%s: %v", pvc.Namespace, pvc.Name, err)
				}
				break
			}
		}
	}
}
