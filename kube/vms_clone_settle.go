package kube

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// annLastRestore is the annotation KubeVirt's restore writes on the VM it
// makes: "<restore name>-<restore UID>" (pkg/storage/snapshot/restore.go,
// lastRestoreAnnotation).
const annLastRestore = "restore.kubevirt.io/lastRestoreUID"

// settleClones ends the clones of VM ref (uid) whose restore made it but
// that KubeVirt has not marked done, before the VM is deleted. KubeVirt's
// clone controller (pkg/virt-controller/watch/clone, v1.7) moves a clone
// on from RestoreInProgress once its restore is complete, and to
// Succeeded only once its informer shows the target VM: a clone the portal
// did not wait for (a cut request) can be short of Succeeded a while
// after its VM is there. Once that VM is deleted the clone never finishes
// (the restore is over and makes no VM again), and the next clone of the
// same name would wait on it rather than start (cloneFrom). So, as
// cloneFrom does for a clone it saw finish, its restore's disks are made
// the VM's (they go with it) and the clone is deleted.
func (v *VMs) settleClones(ctx context.Context, ref vdi.Ref, uid types.UID) error {
	var vm kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&vm); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return fmt.Errorf("kube: read VM %s: %w", ref, err)
	}
	made := vm.Annotations[annLastRestore]
	if vm.UID != uid || made == "" {
		return nil
	}
	var list clonev1beta1.VirtualMachineCloneList
	err := v.clone.Get().Namespace(ref.Namespace).Resource("virtualmachineclones").
		VersionedParams(&metav1.ListOptions{LabelSelector: LabelCloneTarget + "=" + ref.Name}, metav1.ParameterCodec).Do(ctx).Into(&list)
	if err != nil {
		return fmt.Errorf("kube: list the clones of %s: %w", ref, err)
	}
	for _, c := range list.Items {
		restore := c.Status.RestoreName
		if c.DeletionTimestamp != nil || c.Status.Phase == clonev1beta1.Succeeded || c.Status.Phase == clonev1beta1.Failed ||
			restore == nil || !strings.HasPrefix(made, *restore+"-") {
			continue
		}
		if err := v.ownDisks(ctx, ref.Namespace, ref.Name, *restore); err != nil {
			return err
		}
		err := v.clone.Delete().Namespace(ref.Namespace).Resource("virtualmachineclones").Name(c.Name).Do(ctx).Error()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete VirtualMachineClone %s/%s, whose restore made %s: %w", ref.Namespace, c.Name, ref, err)
		}
	}
	return nil
}
