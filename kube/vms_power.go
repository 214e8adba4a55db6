package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// metav1.Status decodes, so that a refusal keeps virt-api's message.
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, kubevirtv1.SubresourceGroupVersions[0])
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &kubevirtv1.SubresourceGroupVersions[0]
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(c)
}

// Start asks KubeVirt to start the member's VM and waits until it runs.
func (v *VMs) Start(ctx context.Context, ref vdi.Ref) error {
	return v.power(ctx, ref, "start", vdi.PowerRunning)
}

// AskStart asks KubeVirt to start the member's VM and returns once
// virt-api took the request (vdi.StartAsker), not once the VM runs: a
// claim answers while the VM boots.
func (v *VMs) AskStart(ctx context.Context, ref vdi.Ref) error {
	now, err := v.liveVM(ctx, ref)
	if err != nil {
		return err
	}
	if memberOf(now).Power == vdi.PowerRunning && !halted(now) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, PowerTimeout)
	defer cancel()
	_, err = v.ask(ctx, ref, "start")
	return err
}

// Stop asks KubeVirt to stop the member's VM, keeping its disks, and waits
// until it is stopped.
func (v *VMs) Stop(ctx context.Context, ref vdi.Ref) error {
	return v.power(ctx, ref, "stop", vdi.PowerStopped)
}

// power PUTs virtualmachines/{name}/{action} and polls the VM until its
// power is want. KubeVirt answers 409 Conflict for several reasons, told
// apart by their message (see conflictOf): the VM is already where it is
// asked to go, or still on its way back (a start while it stops), or it
// changed between virt-api's read and its patch. A VM that fails on the
// way to running ends the wait with its reason; on the way to stopped it
// does not (stopping a VM in CrashLoopBackOff is how it is mended).
func (v *VMs) power(ctx context.Context, ref vdi.Ref, action string, want vdi.Power) error {
	// The API server's copy, not the cache's: a cache a moment behind
	// must neither skip the action nor judge the wait by what came before.
	now, err := v.liveVM(ctx, ref)
	if err != nil {
		return err
	}
	m := memberOf(now)
	// A VM just asked to stop still reads Running until KubeVirt's status
	// catches up: it is not running, it is on its way off.
	if m.Power == want && !(want == vdi.PowerRunning && halted(now)) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, PowerTimeout)
	defer cancel()
	accepted, err := v.ask(ctx, ref, action)
	if err != nil {
		return err
	}
	if accepted {
		// virt-api changed the VM before it answered: wait from there.
		if now, err = v.liveVM(ctx, ref); err != nil {
			return err
		}
	}
	err = v.untilVM(ctx, PowerTimeout, ref, func(vm *kubevirtv1.VirtualMachine) (bool, error) {
		if vm == nil || vm.Labels[vdi.LabelPool] == "" {
			return false, vdi.Errorf(vdi.ENotFound, "It may have been deleted; get another from its pool.", "No desktop %s.", ref)
		}
		if newer(now.ResourceVersion, vm.ResourceVersion) {
			return false, nil // the cache is behind the action: wait for it
		}
		m = memberOf(vm)
		switch {
		case m.Power == want:
			return true, nil
		case m.Power == vdi.PowerFailed && want == vdi.PowerRunning:
			return false, vdi.Errorf(vdi.EUnavailable, "Release it and get another, or ask an admin to look at the VM.",
				"Desktop %s did not %s: %s.", ref, action, m.Reason)
		case want == vdi.PowerRunning && halted(vm):
			// Someone (an admin, the reclaimer) stopped it meanwhile.
			return false, vdi.Errorf(vdi.EConflict, "Start it again if you still need it.", "Desktop %s was stopped while it was starting.", ref)
		case want == vdi.PowerStopped && !halted(vm):
			// Someone (its holder) started it meanwhile.
			return false, vdi.Errorf(vdi.EConflict, "Stop it again if it should be off.", "Desktop %s was started while it was stopping.", ref)
		}
		return false, nil
	})
	var e *vdi.Error
	switch {
	case err == nil || errors.As(err, &e):
		return err
	case errors.Is(err, context.DeadlineExceeded):
		return vdi.Errorf(vdi.EUnavailable, "The cluster may lack room or the VM may be stuck; ask an admin to look at it.",
			"Desktop %s is still %s after %v.", ref, m.Power, PowerTimeout)
	}
	return fmt.Errorf("kube: %s VM %s: still %s: %w", action, ref, m.Power, err)
}

// ask PUTs the action until KubeVirt takes it (accepted: it changes the
// VM) or says the VM is on its way already. A start refused because the VM is still stopping waits for
// the stop to end and asks again; a failed patch test (the VM changed
// under virt-api) asks again at once.
func (v *VMs) ask(ctx context.Context, ref vdi.Ref, action string) (accepted bool, err error) {
	for try := 0; ; try++ {
		// The body too: virt-api's Status may carry no kind, and then
		// client-go's error has lost its message.
		body, err := v.sub.Put().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).SubResource(action).
			Body([]byte("{}")).Do(ctx).Raw()
		if err == nil {
			return true, nil
		}
		if apierrors.IsForbidden(err) {
			// The portal's Role lacks the subresource: the message
			// client-go makes of virt-api's path reads "unknown".
			return false, &vdi.Error{Code: vdi.EUnavailable, Err: fmt.Errorf("kube: %s VM %s: %w", action, ref, err),
				Msg:  fmt.Sprintf("The cluster refused to %s desktop %s: the portal may not update virtualmachines/%s.", action, ref, action),
				Hint: fmt.Sprintf("An admin grants the portal's ServiceAccount update on virtualmachines/start and virtualmachines/stop (subresources.kubevirt.io) in namespace %s, as deploy/rbac.yaml and deploy/pool-namespace do.", ref.Namespace)}
		}
		if !apierrors.IsConflict(err) {
			return false, fmt.Errorf("kube: %s VM %s: %w", action, ref, err)
		}
		switch c := conflictOf(err.Error() + " " + string(body)); {
		case c == conflictThere:
			return false, nil
		case c == conflictStopping && action == "start":
			if stopped, err := v.waitStopped(ctx, ref); err != nil || !stopped {
				return false, err // !stopped: it was not stopping but running, as asked
			}
		case c == conflictChanged && try < 5:
		default:
			return false, fmt.Errorf("kube: %s VM %s: %w: %s", action, ref, err, statusText(body))
		}
	}
}

// statusText returns the message of a metav1.Status body, else the body.
func statusText(body []byte) string {
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return string(body)
}

// What a 409 from virt-api's start or stop means.
type conflict int

const (
	conflictOther    conflict = iota
	conflictThere             // already where asked: the runStrategy says so
	conflictStopping          // start refused: a VMI is still there (running, or stopping)
	conflictChanged           // the VM changed between virt-api's read and its patch
)

// conflictOf classifies a 409 by the messages of KubeVirt's lifecycle.go.
func conflictOf(msg string) conflict {
	switch {
	case strings.Contains(msg, "does not support manual start requests"), // Always/Once: it runs, or will
		strings.Contains(msg, "VM is not running"),                                 // stop of a stopped VM
		strings.Contains(msg, "only supports manual stop requests with a shorter"): // Halted: stopping already
		return conflictThere
	case strings.Contains(msg, "VM is already running"):
		return conflictStopping
	case strings.Contains(msg, "jsonpatch test operation does not apply"), strings.Contains(msg, "testing value"):
		return conflictChanged
	}
	return conflictOther
}

// waitStopped waits until the member's VM has no VMI left, after a start
// was refused because the VMI of a stop in progress is still there, and
// reports true. A VM whose runStrategy says run is not stopping: it is
// running or starting, and waitStopped reports false at once.
func (v *VMs) waitStopped(ctx context.Context, ref vdi.Ref) (bool, error) {
	stopped := false
	err := v.untilVM(ctx, PowerTimeout, ref, func(vm *kubevirtv1.VirtualMachine) (bool, error) {
		if vm == nil || vm.Labels[vdi.LabelPool] == "" {
			return false, vdi.Errorf(vdi.ENotFound, "It may have been deleted; get another from its pool.", "No desktop %s.", ref)
		}
		if !halted(vm) {
			return true, nil
		}
		// The VM's status follows its VMI (KubeVirt writes Stopped once the
		// VMI is gone): look for the VMI only then.
		if vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusStopped {
			return false, nil
		}
		if _, err := v.addrs.vmi(ctx, ref); apierrors.IsNotFound(err) {
			stopped = true
			return true, nil
		} else if err != nil {
			return false, fmt.Errorf("kube: start VM %s: wait for its stop to end: %w", ref, err)
		}
		return false, nil
	})
	if errors.Is(err, context.DeadlineExceeded) {
		return false, vdi.Errorf(vdi.EUnavailable, "The VM may be stuck shutting down; ask an admin to look at it.",
			"Desktop %s is still stopping after %v.", ref, PowerTimeout)
	}
	return stopped, err
}

// halted reports whether vm is asked to be off.
func halted(vm *kubevirtv1.VirtualMachine) bool {
	rs := vm.Spec.RunStrategy
	return (rs != nil && *rs == kubevirtv1.RunStrategyHalted) || (rs == nil && vm.Spec.Running != nil && !*vm.Spec.Running)
}

// alwaysOn reports whether vm is asked to run whatever happens (runStrategy
// Always, or the older running: true): KubeVirt starts it again whenever
// it is not running.
func alwaysOn(vm *kubevirtv1.VirtualMachine) bool {
	rs := vm.Spec.RunStrategy
	return (rs != nil && *rs == kubevirtv1.RunStrategyAlways) || (rs == nil && vm.Spec.Running != nil && *vm.Spec.Running)
}
