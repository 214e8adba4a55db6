package testcluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestKubeVirt_ControllerRestarts: virt-controller ends itself when it
// loses its leader Lease (an API server too slow to renew it within 10 s
// on a busy machine), and a cluster's kubelet starts it again. The test
// cluster does too, after the kubelet's first back-off: a VM made after
// virt-controller was killed is still reconciled (its status Stopped).
func TestKubeVirt_ControllerRestarts(t *testing.T) {
	ctx := context.Background()
	c := testcluster.MustStart(t)
	kv := c.StartKubeVirt(t, testcluster.KubeVirtOptions{})
	admin := c.AdminClient(t)
	ns := c.Namespace(t)
	reconciled := func(name string) {
		t.Helper()
		halted := kubevirtv1.RunStrategyHalted
		vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
				Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
					Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
				}}}}}
		if err := admin.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		if !eventually(2*time.Minute, func() bool {
			return admin.Get(ctx, client.ObjectKeyFromObject(vm), vm) == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped
		}) {
			t.Fatalf("VM %s's status after 2 minutes: %q; want Stopped, written by virt-controller (restarts: %d)\n%s",
				name, vm.Status.PrintableStatus, kv.Restarts("virt-controller"), kv.Tail("virt-controller", 20))
		}
	}
	reconciled("before")
	kv.Kill(t, "virt-controller")
	reconciled("after")
	if n := kv.Restarts("virt-controller"); n != 1 {
		t.Errorf("virt-controller restarted %d times; want 1", n)
	}
	if !strings.Contains(kv.Log("virt-controller"), "virt-controller exited (signal: killed)") {
		t.Errorf("virt-controller's log does not say it was restarted:\n%s", kv.Tail("virt-controller", 20))
	}
}
