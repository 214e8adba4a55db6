package kube_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMDeleteWaitsForGrace deletes a running member whose guest takes its
// time to shut down (the stand-in holds the VM with KubeVirt's finalizer
// until then, within the VM's 60 s termination grace): the pool's deletion
// waits for it and succeeds.
func TestVMDeleteWaitsForGrace(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	const shutdown = 5 * time.Second
	grace := int64(60)
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "slow-1", Labels: map[string]string{vdi.LabelPool: "slow"}},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{TerminationGracePeriodSeconds: &grace}}}}
	if err := admin.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	ref := vdi.Ref{Namespace: ns, Name: "slow-1"}
	if err := vms.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	standIn.ShutdownTakes(ns, ref.Name, shutdown)
	begin := time.Now()
	done := make(chan error, 1)
	go func() { done <- vms.DeletePool(ctx, ns, "slow") }()
	// Meanwhile the VM is there, being deleted, as KubeVirt keeps it.
	time.Sleep(time.Second)
	var got kubevirtv1.VirtualMachine
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vm), &got); err != nil || got.DeletionTimestamp == nil {
		t.Errorf("the VM a second into its deletion: %v (deletionTimestamp %v); want it held by the finalizer", err, got.DeletionTimestamp)
	}
	if err := <-done; err != nil {
		t.Fatalf("delete a pool whose member takes %s to shut down: %v", shutdown, err)
	}
	took := time.Since(begin)
	t.Logf("deleted in %s (guest shutdown %s, grace %ds)", took.Round(time.Millisecond), shutdown, grace)
	if took < shutdown {
		t.Errorf("the deletion returned after %s; want it to wait for the guest's %s shutdown", took, shutdown)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(vm), &got); err == nil {
		t.Errorf("the VM after the deletion: still there")
	}
}
