package testcluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// testStandInCloneTriesAgain: the stand-in's clone fails where KubeVirt's
// does and tries again where KubeVirt's does (pkg/virt-controller/watch/
// clone, pkg/storage/snapshot/restore.go, v1.7). A target VM its restore
// made on an earlier pass (its lastRestoreUID) is taken as made: the
// clone succeeds. A target VM of that name made otherwise holds the clone
// in RestoreInProgress, not Failed, until it is deleted; then the clone
// makes it. Both were Failed before: a write of the target that fails
// once (a Conflict) failed the clone.
func testStandInCloneTriesAgain(t *testing.T, s *testcluster.KubeVirtStandIn, admin client.Client) {
	ctx := context.Background()
	const ns = "default"
	testcluster.StoppedVM(t, admin, ns, "src", nil)
	vmKind, group := "VirtualMachine", kubevirtv1.GroupVersion.Group
	clone := func(name, target string) *clonev1beta1.VirtualMachineClone {
		t.Helper()
		c := &clonev1beta1.VirtualMachineClone{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: clonev1beta1.VirtualMachineCloneSpec{
				Source: &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: vmKind, Name: "src"},
				Target: &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: vmKind, Name: target}}}
		if err := admin.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	phase := func(c *clonev1beta1.VirtualMachineClone) clonev1beta1.VirtualMachineClonePhase {
		t.Helper()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(c), c); err != nil {
			t.Fatal(err)
		}
		return c.Status.Phase
	}
	waitPhase := func(c *clonev1beta1.VirtualMachineClone, want clonev1beta1.VirtualMachineClonePhase) {
		t.Helper()
		for end := time.Now().Add(30 * time.Second); phase(c) != want; time.Sleep(50 * time.Millisecond) {
			if c.Status.Phase == clonev1beta1.Failed || time.Now().After(end) {
				t.Fatalf("clone %s is %q; want %s", c.Name, c.Status.Phase, want)
			}
		}
	}
	madeBy := func(c *clonev1beta1.VirtualMachineClone) {
		t.Helper()
		var vm kubevirtv1.VirtualMachine
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.Spec.Target.Name}, &vm); err != nil {
			t.Fatal(err)
		}
		if got := vm.Annotations["restore.kubevirt.io/lastRestoreUID"]; got != "restore-"+string(c.UID) {
			t.Errorf("VM %s: lastRestoreUID %q; want clone %s's restore", vm.Name, got, c.Name)
		}
	}

	// Made on an earlier pass: the clone's restore wrote the VM, then
	// something failed before the clone was marked done.
	s.HoldClones(ns)
	earlier := clone("earlier", "dst-earlier")
	waitPhase(earlier, clonev1beta1.RestoreInProgress)
	vm := testcluster.StoppedVM(t, admin, ns, "dst-earlier", nil)
	if err := testcluster.Update(ctx, admin, vm, func(vm *kubevirtv1.VirtualMachine) {
		vm.Annotations = map[string]string{"restore.kubevirt.io/lastRestoreUID": "restore-" + string(earlier.UID)}
	}); err != nil {
		t.Fatal(err)
	}
	s.ReleaseClones(ns)
	waitPhase(earlier, clonev1beta1.Succeeded)
	madeBy(earlier)

	// Made otherwise: held until it is gone. A clone made after the held
	// one and done shows the stand-in has passed over the held one since.
	taken := testcluster.StoppedVM(t, admin, ns, "dst-taken", nil)
	held := clone("held", "dst-taken")
	waitPhase(held, clonev1beta1.RestoreInProgress)
	waitPhase(clone("later", "dst-later"), clonev1beta1.Succeeded)
	if p := phase(held); p != clonev1beta1.RestoreInProgress {
		t.Fatalf("clone whose target VM exists, made otherwise: %q; want RestoreInProgress (KubeVirt's restore tries again)", p)
	}
	if err := admin.Delete(ctx, taken); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := admin.Get(ctx, client.ObjectKeyFromObject(taken), &kubevirtv1.VirtualMachine{})
		if apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("VM %s not gone: %v", taken.Name, err)
		}
	}
	waitPhase(held, clonev1beta1.Succeeded)
	madeBy(held)
}
