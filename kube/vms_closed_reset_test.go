package kube_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testResetInClosedPool: pool late (alice's) is closed — its members
// disagree, late-2 edited by hand to bob's. Making late-3 fresh is planned
// with the access it carries itself (alice's), never from the closed
// pool, whose access reads as no list at all: a plan from it (a forged
// mark) makes no member. Once late-3 carries no access either, its
// release is refused and nothing is deleted: it would come back open to
// everyone. Setting the pool's access and policy again mends it all.
func testResetInClosedPool(t *testing.T, s *kubeVirtSetup, svc *vdi.Service, leases vdi.Leases) {
	ctx := s.ctx
	root := vdi.Identity{Login: "root", Admin: true}
	toBob := func(vm *kubevirtv1.VirtualMachine) {
		vm.Annotations[kube.AnnotationAccess] = strings.ReplaceAll(vm.Annotations[kube.AnnotationAccess], `"alice"`, `"bob"`)
	}
	if err := testcluster.Update(ctx, s.admin, s.vm(t, "late-2"), toBob); err != nil {
		t.Fatalf("late-2 edited to bob's: %v", err)
	}
	closed, err := s.vms.Pool(ctx, s.ns, "late")
	if err != nil || closed.Closed == "" {
		t.Fatalf("pool whose members disagree: %+v, %v; want closed", closed, err)
	}
	late3 := vdi.Ref{Namespace: s.ns, Name: "late-3"}
	g, err := s.vms.PlanRecreate(ctx, late3)
	if err != nil || g.Pool.Closed != "" || !slices.Equal(g.Pool.Access.Users, []string{"alice"}) || g.Pool.Mode != vdi.ModeEphemeral {
		t.Errorf("plan to make late-3 fresh in the closed pool: %+v, %v; want late-3's own definition (alice's, ephemeral)", g.Pool, err)
	}
	if err := s.vms.Grow(ctx, vdi.Growth{Pool: closed, Members: []string{"late-9"}}, nil); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("growing from the closed pool's definition: %v; want EConflict", err)
	}
	if slices.Contains(s.members(t, "late"), "late-9") {
		t.Error("late-9 made from the closed pool's definition (open to everyone)")
	}

	strip(t, s, "late-3")
	if _, err := s.vms.PlanRecreate(ctx, late3); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("plan to make late-3 (no access of its own) fresh: %v; want EConflict", err)
	}
	now := time.Now()
	if _, err := leases.Create(ctx, &vdi.Lease{Namespace: s.ns, Member: late3.Name, Pool: "late", Holder: "alice",
		AcquireTime: now, RenewTime: now, Duration: time.Hour}); err != nil {
		t.Fatal(err)
	}
	uid := s.vm(t, late3.Name).UID
	if err := svc.Release(ctx, root, late3, "test"); vdi.ErrorCode(err) != vdi.EConflict || !strings.Contains(err.Error(), "cannot be made fresh") {
		t.Errorf("force-release of late-3 in the closed pool: %v; want EConflict saying it cannot be made fresh", err)
	}
	if got := s.vm(t, late3.Name).UID; got != uid {
		t.Errorf("late-3 was deleted and made again (uid %s, was %s) with no access to make it with", got, uid)
	}
	l, err := leases.Get(ctx, late3)
	if err != nil || l.Holder != "alice" || l.Annotations[vdi.AnnotationReclaiming] != "" {
		t.Fatalf("alice's claim after the refused release: %+v, %v; want it kept, unmarked", l, err)
	}
	if err := leases.Delete(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := svc.UpdatePool(ctx, root, s.ns, "late", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice"}}, Policy: &vdi.Policy{Record: true}}); err != nil {
		t.Fatalf("admin sets the access and policy again: %v", err)
	}
	if p, err := s.vms.Pool(ctx, s.ns, "late"); err != nil || p.Closed != "" || !slices.Equal(p.Access.Users, []string{"alice"}) {
		t.Errorf("after the admin set it again: %+v, %v; want alice's pool", p, err)
	}
}
