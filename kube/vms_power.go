package kube

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// PowerTimeout bounds how long Start and Stop wait for the VM to get there.
const PowerTimeout = 5 * time.Minute

// subresources returns a REST client for subresources.kubevirt.io/v1, the
// API KubeVirt's virt-api serves through the apiserver.
func subresources(cfg *rest.Config) (rest.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &kubevirtv1.SubresourceGroupVersions[0]
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	return rest.RESTClientFor(c)
}

// Start asks KubeVirt to start the member's VM and waits until it runs.
func (v *VMs) Start(ctx context.Context, ref vdi.Ref) error {
	return v.power(ctx, ref, "start", vdi.PowerRunning)
}

// Stop asks KubeVirt to stop the member's VM, keeping its disks, and waits
// until it is stopped.
func (v *VMs) Stop(ctx context.Context, ref vdi.Ref) error {
	return v.power(ctx, ref, "stop", vdi.PowerStopped)
}

// power PUTs virtualmachines/{name}/{action} and polls the VM until its
// power is want; a VM that fails on the way ends the wait with its reason.
func (v *VMs) power(ctx context.Context, ref vdi.Ref, action string, want vdi.Power) error {
	m, err := v.Member(ctx, ref)
	if err != nil {
		return err
	}
	if m.Power == want {
		return nil
	}
	err = v.sub.Put().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).SubResource(action).
		Body([]byte("{}")).Do(ctx).Error()
	// KubeVirt answers Conflict when the VM is already where it is asked to go.
	if err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("kube: %s VM %s: %w", action, ref, err)
	}
	ctx, cancel := context.WithTimeout(ctx, PowerTimeout)
	defer cancel()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		vm, err := v.memberVM(ctx, ref)
		if err != nil {
			return err
		}
		m := memberOf(vm)
		switch {
		case m.Power == want:
			return nil
		case m.Power == vdi.PowerFailed:
			return vdi.Errorf(vdi.EUnavailable, "Release it and get another, or ask an admin to look at the VM.",
				"Desktop %s did not %s: %s.", ref, action, m.Reason)
		case want == vdi.PowerRunning && halted(vm):
			// Someone (an admin, the reclaimer) stopped it meanwhile.
			return vdi.Errorf(vdi.EConflict, "Start it again if you still need it.", "Desktop %s was stopped while it was starting.", ref)
		}
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return vdi.Errorf(vdi.EUnavailable, "The cluster may lack room or the VM may be stuck; ask an admin to look at it.",
					"Desktop %s is still %s after %v.", ref, m.Power, PowerTimeout)
			}
			return fmt.Errorf("kube: %s VM %s: still %s: %w", action, ref, m.Power, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// halted reports whether vm is asked to be off.
func halted(vm *kubevirtv1.VirtualMachine) bool {
	rs := vm.Spec.RunStrategy
	return (rs != nil && *rs == kubevirtv1.RunStrategyHalted) || (rs == nil && vm.Spec.Running != nil && !*vm.Spec.Running)
}
