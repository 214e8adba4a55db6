package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// A clone's restore makes new disks for its target, but KubeVirt makes
// them the target VM's only when they came from the source's
// dataVolumeTemplates (or the source VM owned its PVC): a golden VM whose
// disks are plain PVCs would leave a full disk behind every shrink, pool
// deletion and ephemeral recreate. So once a clone is done, the portal
// makes the target VM the owner of each of its PVCs that has no owner, and
// the garbage collector deletes them with the member. Only the PVCs its
// own restore made (annotation restore.kubevirt.io/name): a volume the
// snapshot left out keeps its original claim in the restored VM, and that
// claim is the golden VM's or another VM's, never the member's to delete.

// annRestoreName is the annotation KubeVirt's restore writes on the PVCs it
// makes (pkg/storage/snapshot/restore.go, RestoreNameAnnotation).
const annRestoreName = "restore.kubevirt.io/name"

// ownDisks makes the VM namespace/target the owner of the unowned PVCs of
// its volumes that the VirtualMachineRestore named restore made.
func (v *VMs) ownDisks(ctx context.Context, namespace, target, restore string) error {
	if restore == "" {
		return nil
	}
	var vm kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(namespace).Resource("virtualmachines").Name(target).Do(ctx).Into(&vm); err != nil {
		return fmt.Errorf("kube: own the disks of %s/%s: %w", namespace, target, err)
	}
	for _, claim := range claimsOf(&vm) {
		pvc, err := v.addrs.core.PersistentVolumeClaims(namespace).Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue // a DataVolume still making it: its owner is the VM's
		} else if err != nil {
			return fmt.Errorf("kube: own disk %s of %s/%s: %w", claim, namespace, target, err)
		}
		if len(pvc.OwnerReferences) > 0 || pvc.Annotations[annRestoreName] != restore {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"resourceVersion": pvc.ResourceVersion,
			"ownerReferences": []metav1.OwnerReference{{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine", Name: vm.Name, UID: vm.UID}}}})
		if _, err := v.addrs.core.PersistentVolumeClaims(namespace).Patch(ctx, claim, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("kube: own disk %s of %s/%s: %w", claim, namespace, target, err)
		}
	}
	return nil
}

// claimsOf returns the PVCs vm's volumes use: persistentVolumeClaim
// volumes, and the PVCs of its DataVolumes (named like them).
func claimsOf(vm *kubevirtv1.VirtualMachine) []string {
	if vm.Spec.Template == nil {
		return nil
	}
	var out []string
	for _, vol := range vm.Spec.Template.Spec.Volumes {
		switch {
		case vol.PersistentVolumeClaim != nil:
			out = append(out, vol.PersistentVolumeClaim.ClaimName)
		case vol.DataVolume != nil:
			out = append(out, vol.DataVolume.Name)
		}
	}
	return out
}
