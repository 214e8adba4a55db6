package kube_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMPoolLifecycle runs a VM pool through vdi.Service on the Kubernetes
// backend, as the portal's ServiceAccount: create from a golden VM, claim by
// two users (members power on through the subresources), resize 3 -> 5 -> 2
// with the claimed members surviving the shrink, delete.
func TestVMPoolLifecycle(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	always := kubevirtv1.RunStrategyAlways
	if err := admin.Create(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always}}); err != nil {
		t.Fatal(err)
	}
	svc, leases := s.service(t)
	root := vdi.Identity{Login: "root", Admin: true}
	pool := vdi.Pool{Namespace: ns, Name: "demo", Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "golden", Size: 3}

	t.Run("BadGolden", func(t *testing.T) {
		for _, c := range []struct{ source, ns, want string }{
			{"nope", ns, "pass the namespace"},
			{"golden", "default", "pass the namespace"},
			{"busy", ns, "Stop the golden VM first"},
		} {
			p := pool
			p.Source, p.Namespace = c.source, c.ns
			err := svc.CreatePool(ctx, root, p)
			var e *vdi.Error
			if !errors.As(err, &e) || !strings.Contains(e.Msg+" "+e.Hint, c.want) {
				t.Errorf("pool from %s/%s: %v; want an error saying %q", c.ns, c.source, err, c.want)
			}
		}
	})
	if err := svc.CreatePool(ctx, root, pool); err != nil {
		t.Fatalf("create: %v", err)
	}
	members := func() []string { return memberNames(t, vms, ns, "demo") }
	if got := strings.Join(members(), ","); got != "demo-1,demo-2,demo-3" {
		t.Fatalf("members after create: %s; want demo-1..3", got)
	}
	a, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, ns, "demo")
	if err != nil {
		t.Fatalf("alice's claim: %v", err)
	}
	b, err := svc.Claim(ctx, vdi.Identity{Login: "bob"}, ns, "demo")
	if err != nil {
		t.Fatalf("bob's claim: %v", err)
	}
	if a.Name == b.Name || a.Power != vdi.PowerRunning || b.Power != vdi.PowerRunning {
		t.Fatalf("alice got %s (%s), bob got %s (%s); want two different running members", a.Name, a.Power, b.Name, b.Power)
	}
	// The claim's mirror on the VM follows the answer.
	var vm kubevirtv1.VirtualMachine
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: a.Name}, &vm)
		if err == nil && vm.Labels[vdi.LabelAssignedTo] == "alice" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's VM labels %v, %v; want %s=alice", vm.Labels, err, vdi.LabelAssignedTo)
		}
	}
	size := func(n int) error { return svc.UpdatePool(ctx, root, ns, "demo", vdi.PoolUpdate{Size: &n}) }
	if err := size(5); err != nil {
		t.Fatalf("resize to 5: %v", err)
	}
	if got := len(members()); got != 5 {
		t.Fatalf("%d members after growing to 5", got)
	}
	if err := size(1); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("shrinking below the claimed members: %v; want EConflict", err)
	}
	if err := size(2); err != nil {
		t.Fatalf("resize to 2: %v", err)
	}
	if got := members(); len(got) != 2 || !slices.Contains(got, a.Name) || !slices.Contains(got, b.Name) {
		t.Fatalf("members after shrinking to 2: %v; want alice's %s and bob's %s", got, a.Name, b.Name)
	}
	if err := svc.DeletePool(ctx, root, ns, "demo"); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("deleting a pool with claimed members: %v; want EConflict", err)
	}
	for _, d := range []vdi.Desktop{a, b} {
		if err := svc.Release(ctx, root, d.Ref(), "test"); err != nil {
			t.Fatalf("force-release %s: %v", d.Name, err)
		}
	}
	for _, d := range []vdi.Desktop{a, b} {
		waitClaimGone(t, leases, d.Ref()) // the release answers while the VM stops
	}
	if err := svc.DeletePool(ctx, root, ns, "demo"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := vms.Pool(ctx, ns, "demo"); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("pool after delete: %v; want ENotFound", err)
	}
}
