package testcluster

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TEST-ONLY: deleting a VM, as KubeVirt's VM controller does it. A VM that
// has run carries the controller's finalizer; deleting it marks it
// Terminating, the guest shuts down in its own time (ShutdownTakes, at
// most its termination grace), its VMI and launcher Pod go, and only then
// the finalizer, so the VM stays visible, being deleted, meanwhile.

// standInFinalizer is the finalizer of KubeVirt's VM controller.
const standInFinalizer = "kubevirt.io/virtualMachineControllerFinalize"

// addFinalizer puts the VM controller's finalizer on vm.
func (s *KubeVirtStandIn) addFinalizer(ctx context.Context, vm *kubevirtv1.VirtualMachine) error {
	if slices.Contains(vm.Finalizers, standInFinalizer) {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"finalizers": append(slices.Clone(vm.Finalizers), standInFinalizer), "resourceVersion": vm.ResourceVersion}})
	return s.cl.Patch(ctx, vm, client.RawPatch(types.MergePatchType, patch))
}

// finalizeDeleted shuts down the guests of VMs being deleted and lets
// them go.
func (s *KubeVirtStandIn) finalizeDeleted(ctx context.Context) {
	var list kubevirtv1.VirtualMachineList
	if err := s.cl.List(ctx, &list); err != nil {
		return
	}
	for i := range list.Items {
		vm := &list.Items[i]
		if vm.DeletionTimestamp == nil || !slices.Contains(vm.Finalizers, standInFinalizer) {
			continue
		}
		key := vm.Namespace + "/" + vm.Name
		s.mu.Lock()
		busy := s.finalizing[key]
		s.finalizing[key] = true
		s.mu.Unlock()
		if busy {
			continue
		}
		ns, name, uid := vm.Namespace, vm.Name, vm.UID
		s.enqueue(key, func(ctx context.Context) {
			defer func() {
				s.mu.Lock()
				delete(s.finalizing, key)
				s.mu.Unlock()
			}()
			s.setVMStatus(ctx, ns, name, kubevirtv1.VirtualMachineStatusTerminating, false, "")
			s.shutdown(ctx, ns, name, false)
			var cur kubevirtv1.VirtualMachine
			if err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cur); err != nil || cur.UID != uid {
				return
			}
			rest := slices.DeleteFunc(slices.Clone(cur.Finalizers), func(f string) bool { return f == standInFinalizer })
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"finalizers": rest, "resourceVersion": cur.ResourceVersion}})
			if err := s.cl.Patch(ctx, &cur, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				s.logf("finalize VM %s: %v", key, err)
			}
		})
	}
}

// reapOrphans ends the guests of VMs that are gone or were replaced
// without the finalizer (a forced deletion), as KubeVirt's garbage
// collection of the VMI would.
func (s *KubeVirtStandIn) reapOrphans(ctx context.Context) {
	s.mu.Lock()
	running := make(map[string]types.UID, len(s.vmis))
	for key, g := range s.vmis {
		if s.ops[key] == nil { // a queued start or stop decides
			running[key] = g.vmUID
		}
	}
	s.mu.Unlock()
	for key, uid := range running {
		ns, name, _ := strings.Cut(key, "/")
		var vm kubevirtv1.VirtualMachine
		err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm)
		if apierrors.IsNotFound(err) || err == nil && vm.UID != uid {
			s.enqueue(key, func(ctx context.Context) { s.shutdown(ctx, ns, name, false) })
		}
	}
}
