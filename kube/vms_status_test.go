package kube

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestMemberOf_StoppedButAskedToRun: a VM just asked to start (its
// runStrategy Always) whose status still says Stopped reads as starting,
// so the console page waits for it instead of showing a desktop that
// stopped; one asked to halt, or started by hand (Manual), reads stopped.
func TestMemberOf_StoppedButAskedToRun(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		name    string
		rs      *kubevirtv1.VirtualMachineRunStrategy
		running *bool
		want    vdi.Power
	}{
		{"Always", ptr(kubevirtv1.RunStrategyAlways), nil, vdi.PowerStarting},
		{"running: true", nil, &yes, vdi.PowerStarting},
		{"Halted", ptr(kubevirtv1.RunStrategyHalted), nil, vdi.PowerStopped},
		{"running: false", nil, &no, vdi.PowerStopped},
		{"Manual", ptr(kubevirtv1.RunStrategyManual), nil, vdi.PowerStopped},
		{"RerunOnFailure", ptr(kubevirtv1.RunStrategyRerunOnFailure), nil, vdi.PowerStopped},
	} {
		vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: c.rs, Running: c.running},
			Status: kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped}}
		if got := memberOf(vm).Power; got != c.want {
			t.Errorf("%s, status Stopped: %s; want %s", c.name, got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }
