package kube_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMs reads VM pools back from labelled VirtualMachines, as the
// portal's ServiceAccount.
func TestVMs(t *testing.T) {
	s := newVMSetup(t)
	s.c.InstallKubeVirt(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	halted := kubevirtv1.RunStrategyHalted
	vm := func(name string, labels, ann map[string]string, status kubevirtv1.VirtualMachineStatus) {
		t.Helper()
		o := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels, Annotations: ann},
			Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted}}
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		if status.PrintableStatus != "" {
			if err := testcluster.UpdateStatus(ctx, admin, o, func(o *kubevirtv1.VirtualMachine) { o.Status = status }); err != nil {
				t.Fatal(err)
			}
		}
	}
	inPool := func(p string) map[string]string { return map[string]string{vdi.LabelPool: p} }
	eph := map[string]string{kube.AnnotationMode: "ephemeral", kube.AnnotationSource: "golden",
		kube.AnnotationPolicy: `{"disconnectGrace":60000000000}`}
	vm("golden", nil, nil, kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped})
	vm("desk-1", inPool("desk"), eph, kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusRunning})
	vm("desk-2", inPool("desk"), eph, kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusStopped})
	vm("desk-3", inPool("desk"), eph, kubevirtv1.VirtualMachineStatus{PrintableStatus: kubevirtv1.VirtualMachineStatusUnschedulable,
		Conditions: []kubevirtv1.VirtualMachineCondition{{Type: kubevirtv1.VirtualMachineReady, Status: corev1.ConditionFalse,
			Message: "0/3 nodes are available: insufficient nvidia.com/gpu"}}})
	vm("lab-1", inPool("lab"), nil, kubevirtv1.VirtualMachineStatus{})

	pools, err := vms.Pools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]vdi.Pool{}
	for _, p := range pools {
		if p.Namespace == ns {
			got[p.Name] = p
		}
	}
	if p := got["desk"]; p.Size != 3 || p.Mode != vdi.ModeEphemeral || p.Source != "golden" || p.Kind != vdi.KindVM ||
		p.Policy.DisconnectGrace.Minutes() != 1 {
		t.Errorf("pool desk = %+v; want 3 ephemeral VMs from golden with a 1m grace", p)
	}
	if p := got["lab"]; p.Size != 1 || p.Mode != vdi.ModePersistent {
		t.Errorf("pool lab = %+v; want 1 persistent VM (the default)", p)
	}
	if len(got) != 2 {
		t.Errorf("pools in %s: %v; want desk and lab only (the golden VM is in no pool)", ns, got)
	}

	members, err := vms.Members(ctx, ns, "desk")
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name   string
		power  vdi.Power
		reason string
	}{
		{"desk-1", vdi.PowerRunning, ""},
		{"desk-2", vdi.PowerStopped, ""},
		{"desk-3", vdi.PowerFailed, "ErrorUnschedulable: 0/3 nodes are available: insufficient nvidia.com/gpu"},
	}
	if len(members) != len(want) {
		t.Fatalf("members of desk: %+v; want %d", members, len(want))
	}
	for i, w := range want {
		if m := members[i]; m.Name != w.name || m.Power != w.power || m.Reason != w.reason || m.Pool != "desk" {
			t.Errorf("member %d = %+v; want %s %s %q", i, m, w.name, w.power, w.reason)
		}
	}
	if m, err := vms.Member(ctx, vdi.Ref{Namespace: ns, Name: "lab-1"}); err != nil || m.Power != vdi.PowerStopped {
		t.Errorf("lab-1 with no status yet and runStrategy Halted: %+v, %v; want stopped", m, err)
	}
	for _, name := range []string{"golden", "gone"} {
		if _, err := vms.Member(ctx, vdi.Ref{Namespace: ns, Name: name}); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("Member(%s): %v; want ENotFound", name, err)
		}
	}
	if _, err := vms.Pool(ctx, ns, "nope"); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("Pool(nope): %v; want ENotFound", err)
	}
}

// TestVMsPower starts and stops a member through the subresources API, as
// the portal's ServiceAccount, against the KubeVirt stand-in.
func TestVMsPower(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	vm := testcluster.StoppedVM(t, admin, ns, "pw-1", map[string]string{vdi.LabelPool: "pw"})
	ref := vdi.Ref{Namespace: ns, Name: "pw-1"}
	if err := vms.Start(ctx, ref); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if m, _ := vms.Member(ctx, ref); m.Power != vdi.PowerRunning {
		t.Errorf("after Start %s is %s; want running", ref, m.Power)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil || vm.Spec.RunStrategy == nil || *vm.Spec.RunStrategy != kubevirtv1.RunStrategyAlways {
		t.Errorf("after Start the VM's runStrategy is %v, %v; want Always", vm.Spec.RunStrategy, err)
	}
	if err := vms.Stop(ctx, ref); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if m, _ := vms.Member(ctx, ref); m.Power != vdi.PowerStopped {
		t.Errorf("after Stop %s is %s; want stopped", ref, m.Power)
	}
	if err := vms.Start(ctx, vdi.Ref{Namespace: ns, Name: "gone"}); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("Start of a missing VM: %v; want ENotFound", err)
	}
}

// TestVMsMirrorClaim labels a member as its holder's and clears it, as the
// portal's ServiceAccount.
func TestVMsMirrorClaim(t *testing.T) {
	s := newVMSetup(t)
	s.c.InstallKubeVirt(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mir-1",
		Labels: map[string]string{vdi.LabelPool: "mir", "team": "blue"}}}
	if err := admin.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	ref := vdi.Ref{Namespace: ns, Name: "mir-1"}
	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	if err := vms.MirrorClaim(ctx, ref, "alice@example.com", at); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if vm.Labels[vdi.LabelAssignedTo] != "alice_example.com" || vm.Annotations[vdi.LabelAssignedTo] != "alice@example.com" ||
		vm.Annotations[kube.AnnotationClaimedAt] != "2026-11-29T10:00:00Z" || vm.Labels["team"] != "blue" {
		t.Errorf("after mirroring: labels %v, annotations %v; want alice's claim shown and other labels kept", vm.Labels, vm.Annotations)
	}
	if err := vms.MirrorClaim(ctx, ref, "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if _, ok := vm.Labels[vdi.LabelAssignedTo]; ok || vm.Annotations[kube.AnnotationClaimedAt] != "" {
		t.Errorf("after clearing: labels %v, annotations %v; want no claim shown", vm.Labels, vm.Annotations)
	}
	if err := vms.MirrorClaim(ctx, vdi.Ref{Namespace: ns, Name: "gone"}, "bob", at); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("mirroring on a missing VM: %v; want ENotFound", err)
	}
}

// TestVMsRecreate re-clones an ephemeral member from its golden VM through
// a VirtualMachineClone, as the portal's ServiceAccount.
func TestVMsRecreate(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	halted := kubevirtv1.RunStrategyHalted
	for _, vm := range []*kubevirtv1.VirtualMachine{
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "golden", Annotations: map[string]string{"made-by": "golden"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eph-1", Labels: map[string]string{vdi.LabelPool: "eph", "scratch": "dirty"},
			Annotations: map[string]string{kube.AnnotationMode: "ephemeral", kube.AnnotationSource: "golden"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan-1", Labels: map[string]string{vdi.LabelPool: "orphan"},
			Annotations: map[string]string{kube.AnnotationMode: "ephemeral", kube.AnnotationSource: "no-such-golden"}}},
	} {
		vm.Spec.RunStrategy = &halted
		if err := admin.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	var before kubevirtv1.VirtualMachine
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "eph-1"}, &before); err != nil {
		t.Fatal(err)
	}
	if err := vms.Recreate(ctx, vdi.Ref{Namespace: ns, Name: "eph-1"}); err != nil {
		t.Fatalf("Recreate: %v", err)
	}
	var after kubevirtv1.VirtualMachine
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "eph-1"}, &after); err != nil {
		t.Fatal(err)
	}
	if after.UID == before.UID || after.Labels[vdi.LabelPool] != "eph" || after.Labels["scratch"] != "" ||
		after.Annotations[kube.AnnotationSource] != "golden" || after.Annotations["made-by"] != "golden" {
		t.Errorf("after Recreate: uid %s (was %s), labels %v, annotations %v; want a new VM from golden in pool eph",
			after.UID, before.UID, after.Labels, after.Annotations)
	}
	err := vms.Recreate(ctx, vdi.Ref{Namespace: ns, Name: "orphan-1"})
	if err == nil || !strings.Contains(err.Error(), "golden VM "+ns+"/no-such-golden not found") {
		t.Errorf("Recreate from a missing golden VM: %v; want an error naming it", err)
	}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orphan-1"}, &after); err != nil {
		t.Errorf("the member whose golden VM is missing: %v; want it kept", err)
	}
	err = vms.Clone(ctx, ns, "no-such-golden", "orphan-2")
	if err == nil || !strings.Contains(err.Error(), "VirtualMachineClone "+ns+"/orphan-2-clone-") {
		t.Errorf("a clone that fails: %v; want an error naming the VirtualMachineClone", err)
	}
}
