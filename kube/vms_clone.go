package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// CloneTimeout bounds the wait for a clone's target VM: the clone object
// exists long before its VM does.
const CloneTimeout = 2 * time.Minute

func clones(cfg *rest.Config) (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := clonev1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &clonev1beta1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(c)
}

// Recreate makes an ephemeral member fresh: its VM is deleted and cloned
// again from the pool's golden VM (AnnotationSource) under the same name,
// with the member's pool label and annotations.
func (v *VMs) Recreate(ctx context.Context, ref vdi.Ref) error {
	var old kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&old); apierrors.IsNotFound(err) {
		return vdi.Errorf(vdi.ENotFound, "It may have been deleted already.", "No desktop %s.", ref)
	} else if err != nil {
		return fmt.Errorf("kube: recreate %s: %w", ref, err)
	}
	source := old.Annotations[AnnotationSource]
	if source == "" {
		return fmt.Errorf("kube: recreate %s: the VM has no %s annotation naming its golden VM", ref, AnnotationSource)
	}
	// Refuse before deleting anything: a member must not vanish because its
	// golden VM did.
	var golden kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(source).Do(ctx).Into(&golden); apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: recreate %s: golden VM %s/%s not found (members are cloned from a golden VM in their own namespace)", ref, ref.Namespace, source)
	} else if err != nil {
		return fmt.Errorf("kube: recreate %s: %w", ref, err)
	}
	if err := v.deleteVM(ctx, ref, old.UID); err != nil {
		return err
	}
	if err := v.Clone(ctx, ref.Namespace, source, ref.Name); err != nil {
		return err
	}
	labels := map[string]any{vdi.LabelPool: old.Labels[vdi.LabelPool]}
	ann := map[string]any{}
	for _, k := range []string{AnnotationMode, AnnotationSource, AnnotationPolicy, AnnotationAccess, AnnotationLicenses} {
		if s, ok := old.Annotations[k]; ok {
			ann[k] = s
		}
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "annotations": ann}})
	if err := v.rest.Patch(types.MergePatchType).Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).
		Body(patch).Do(ctx).Error(); err != nil {
		return fmt.Errorf("kube: recreate %s: label the new VM: %w", ref, err)
	}
	return nil
}

// deleteVM deletes the VM with uid and waits until it is gone.
func (v *VMs) deleteVM(ctx context.Context, ref vdi.Ref, uid types.UID) error {
	err := v.rest.Delete().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete VM %s: %w", ref, err)
	}
	return poll(ctx, CloneTimeout, func() (bool, error) {
		var vm kubevirtv1.VirtualMachine
		err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&vm)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && vm.UID != uid, err
	})
}

// Clone clones the VM source into target in namespace with a
// VirtualMachineClone, waits for the target VM (CloneTimeout) and deletes
// the clone object. The error of a clone that never makes its VM names the
// clone and the usual causes.
func (v *VMs) Clone(ctx context.Context, namespace, source, target string) error {
	apiGroup := kubevirtv1.GroupVersion.Group
	vmc := &clonev1beta1.VirtualMachineClone{
		TypeMeta:   metav1.TypeMeta{APIVersion: clonev1beta1.SchemeGroupVersion.String(), Kind: "VirtualMachineClone"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: target + "-clone-"},
		Spec: clonev1beta1.VirtualMachineCloneSpec{
			Source: &corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: source},
			Target: &corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: target},
		},
	}
	var made clonev1beta1.VirtualMachineClone
	if err := v.clone.Post().Namespace(namespace).Resource("virtualmachineclones").Body(vmc).Do(ctx).Into(&made); err != nil {
		return fmt.Errorf("kube: clone VM %s/%s to %s: %w", namespace, source, target, err)
	}
	defer v.clone.Delete().Namespace(namespace).Resource("virtualmachineclones").Name(made.Name).Do(context.WithoutCancel(ctx))
	err := poll(ctx, CloneTimeout, func() (bool, error) {
		var c clonev1beta1.VirtualMachineClone
		if err := v.clone.Get().Namespace(namespace).Resource("virtualmachineclones").Name(made.Name).Do(ctx).Into(&c); err != nil {
			return false, err
		}
		if c.Status.Phase == clonev1beta1.Failed {
			return false, fmt.Errorf("VirtualMachineClone %s/%s failed", namespace, made.Name)
		}
		var vm kubevirtv1.VirtualMachine
		err := v.rest.Get().Namespace(namespace).Resource("virtualmachines").Name(target).Do(ctx).Into(&vm)
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return &vdi.Error{Code: vdi.EUnavailable, Err: err,
			Msg: fmt.Sprintf("Cloning VM %s/%s to %s made no VM: VirtualMachineClone %s/%s (%v).",
				namespace, source, target, namespace, made.Name, err),
			Hint: "Check the StorageClass and VolumeSnapshotClass of the golden VM's disks, that its PVCs can be snapshotted, " +
				"and the clone's events (kubectl describe vmclone); then try again."}
	}
	return nil
}

// poll calls done every 250 ms until it reports true or fails, or timeout.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := done()
		if err != nil || ok {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
	}
}
