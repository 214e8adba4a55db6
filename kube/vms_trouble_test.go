package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMPoolTrouble: what goes wrong on a real cluster says what happened
// and what to do, and loses no claim: a clone that never makes its VM, a
// member VM deleted by hand under a claim, a VM stopped while it starts.
func TestVMPoolTrouble(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	svc, leases := s.service(t)
	root := vdi.Identity{Login: "root", Admin: true}
	alice := vdi.Identity{Login: "alice"}

	t.Run("DefinitionDuringReset", func(t *testing.T) { testDefinitionDuringReset(t, s, standIn, svc, leases) })
	t.Run("DefinitionWriteLoses", func(t *testing.T) { testDefinitionWriteLoses(t, s) })
	t.Run("OneMemberMadeFresh", func(t *testing.T) { testOneMemberMadeFresh(t, s, standIn, svc, leases) })

	t.Run("SnapshotStuck", func(t *testing.T) {
		stuckNS := s.c.Namespace(t)
		testcluster.StoppedVM(t, admin, stuckNS, "golden", nil)
		standIn.HoldSnapshots(stuckNS)
		// kube.SnapshotTimeout is 10 minutes; the caller's deadline ends the wait sooner.
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		err := vms.CreatePool(cctx, vdi.Pool{Namespace: stuckNS, Name: "stuck", Kind: vdi.KindVM, Source: "golden", Size: 1}) // the backend: the service runs it as a job
		var e *vdi.Error
		if !errors.As(err, &e) || e.Code != vdi.EUnavailable || !strings.Contains(e.Msg, "VirtualMachineSnapshot "+stuckNS+"/golden-corral-") ||
			!strings.Contains(e.Hint, "VolumeSnapshotClass") {
			t.Fatalf("create with a snapshot that never gets ready: %v; want EUnavailable naming the snapshot and the likely causes", err)
		}
		var snaps snapshotv1beta1.VirtualMachineSnapshotList
		if err := admin.List(ctx, &snaps, client.InNamespace(stuckNS)); err != nil || len(snaps.Items) != 0 {
			t.Errorf("snapshots left after the failed create: %d, %v; want the portal to delete its unready snapshot", len(snaps.Items), err)
		}
	})

	t.Run("CloneStuck", func(t *testing.T) {
		stuckNS := s.c.Namespace(t)
		testcluster.StoppedVM(t, admin, stuckNS, "golden", nil)
		standIn.HoldClones(stuckNS)
		// kube.CloneTimeout is 2 minutes; the caller's deadline ends the wait sooner.
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		err := vms.CreatePool(cctx, vdi.Pool{Namespace: stuckNS, Name: "stuck", Kind: vdi.KindVM, Source: "golden", Size: 1,
			Access: vdi.Access{Users: []string{"alice"}}, Policy: vdi.Policy{Record: true}}) // the backend: the service runs it as a job
		var e *vdi.Error
		if !errors.As(err, &e) || e.Code != vdi.EUnavailable || !strings.Contains(e.Msg, "VirtualMachineClone "+stuckNS+"/stuck-1-clone-") ||
			!strings.Contains(e.Msg, "has not finished") || !strings.Contains(e.Hint, "VolumeSnapshotClass") {
			t.Fatalf("create with a clone that does not finish: %v; want EUnavailable naming the clone, still going, and the likely causes", err)
		}
		var clones clonev1beta1.VirtualMachineCloneList
		if err := admin.List(ctx, &clones, client.InNamespace(stuckNS)); err != nil || len(clones.Items) != 1 {
			t.Fatalf("clones after the timed-out create: %d, %v; want the unfinished clone kept", len(clones.Items), err)
		}
		// Meanwhile the pool has no member to carry its definition: it
		// cannot be changed (nor claimed), and the answer says why.
		err = svc.UpdatePool(ctx, root, stuckNS, "stuck", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice", "bob"}}})
		if !errors.As(err, &e) || e.Code != vdi.ENotFound || !strings.Contains(e.Msg, "stuck-1 is being cloned (VirtualMachineClone "+stuckNS+"/stuck-1-clone-") ||
			!strings.Contains(e.Hint, "kubectl get vmclone") {
			t.Errorf("changing a pool whose one member is being cloned: %v; want ENotFound saying its member is being cloned", err)
		}
		// The clone finishes later and makes the member, in its pool.
		standIn.ReleaseClones(stuckNS)
		deadline := time.Now().Add(15 * time.Second)
		for {
			var vm kubevirtv1.VirtualMachine
			err := admin.Get(ctx, client.ObjectKey{Namespace: stuckNS, Name: "stuck-1"}, &vm)
			if err == nil && vm.Labels[vdi.LabelPool] == "stuck" && vm.Annotations[kube.AnnotationSource] == "golden" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the unfinished clone's VM: %v, labels %v; want stuck-1 in pool stuck", err, vm.Labels)
			}
			time.Sleep(100 * time.Millisecond)
		}
		mustRecordedFor(t, vms, stuckNS, "stuck", 1, "alice")
	})

	if err := svc.CreatePool(ctx, root, vdi.Pool{Namespace: ns, Name: "desk", Kind: vdi.KindVM, Source: "golden", Size: 3}); err != nil {
		t.Fatal(err)
	}

	t.Run("MemberDeletedUnderClaim", func(t *testing.T) {
		d, err := svc.Claim(ctx, alice, ns, "desk")
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(ctx, &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: d.Name}}); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			var vm kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: d.Name}, &vm); client.IgnoreNotFound(err) == nil && err != nil {
				break
			} else if time.Now().After(end) {
				t.Fatalf("VM %s still there after delete", d.Name)
			}
		}
		_, err = svc.Desktop(ctx, alice, d.Ref())
		var e *vdi.Error
		if !errors.As(err, &e) || e.Code != vdi.ENotFound || e.Hint == "" {
			t.Errorf("alice's desktop after its VM was deleted: %v; want ENotFound with a hint", err)
		}
		// The claim is still hers until she lets it go: asking again
		// answers the same (gone) desktop rather than silently another.
		l, err := leases.Get(ctx, d.Ref())
		if err != nil || l.Holder != "alice" {
			t.Fatalf("alice's Lease after her VM was deleted: %+v, %v; want kept", l, err)
		}
		if err := svc.Release(ctx, alice, d.Ref(), ""); err != nil {
			t.Fatalf("releasing a desktop whose VM is gone: %v; want the claim let go", err)
		}
		waitClaimGone(t, leases, d.Ref())
		d2, err := svc.Claim(ctx, alice, ns, "desk")
		if err != nil || d2.Name == d.Name {
			t.Fatalf("alice's next claim: %+v, %v; want the member that still exists", d2, err)
		}
	})

	t.Run("StoppedWhileStarting", func(t *testing.T) {
		ms, err := vms.Members(ctx, ns, "desk")
		if err != nil || len(ms) == 0 {
			t.Fatal(ms, err)
		}
		var ref vdi.Ref
		for _, m := range ms {
			if m.Power == vdi.PowerStopped {
				ref = m.Ref()
			}
		}
		if ref.Name == "" {
			t.Fatalf("no stopped member in %+v", ms)
		}
		done := make(chan error, 1)
		begin := time.Now()
		go func() { done <- vms.Start(ctx, ref) }()
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if m, err := vms.Member(ctx, ref); err == nil && m.Power != vdi.PowerStopped {
				break
			} else if time.Now().After(end) {
				t.Fatalf("%s never left stopped", ref)
			}
		}
		if err := vms.Stop(ctx, ref); err != nil {
			t.Fatalf("stop while starting: %v", err)
		}
		select {
		case err := <-done:
			if vdi.ErrorCode(err) != vdi.EConflict && err != nil {
				t.Errorf("start of a VM stopped meanwhile: %v; want EConflict saying it was stopped (or done before the stop)", err)
			}
			t.Logf("start ended %v after it began: %v", time.Since(begin).Round(time.Millisecond), err)
		case <-time.After(30 * time.Second):
			t.Fatal("Start still waits 30s after the VM was stopped")
		}
	})
}

// TestVMPoolRemovalTakesTheClaim: shrinking or deleting a VM pool of the
// Cluster backend claims each member before it deletes it, so a claim made
// after the caller looked at the claims (the stale view below) wins: the
// claimed member stays, and its user keeps it.
func TestVMPoolRemovalTakesTheClaim(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns := s.ctx, s.ns
	testcluster.StoppedVM(t, s.admin, ns, "golden", nil)
	leases := mustLeases(t, s.sa)
	cl, err := kube.NewCluster(kube.Config{REST: s.sa, Leases: leases})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.CreatePool(ctx, vdi.Pool{Namespace: ns, Name: "desk", Kind: vdi.KindVM, Source: "golden", Size: 3}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	alices, err := leases.Create(ctx, &vdi.Lease{Namespace: ns, Member: "desk-3", Pool: "desk", Holder: "alice",
		AcquireTime: now, RenewTime: now, Duration: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	stale := func(string) bool { return false } // looked before alice's claim
	members := func() string { return strings.Join(memberNames(t, cl, ns, "desk"), ",") }
	if err := cl.ResizePool(ctx, ns, "desk", 2, stale); err != nil {
		t.Fatalf("shrink to 2 with a stale view: %v", err)
	}
	if got := members(); got != "desk-1,desk-3" {
		t.Fatalf("members after the shrink: %s; want desk-1,desk-3 (alice's desk-3 kept, desk-2 removed)", got)
	}
	if err := cl.ResizePool(ctx, ns, "desk", 0, stale); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("shrink to 0 while alice holds desk-3: %v; want EConflict", err)
	}
	if err := cl.DeletePool(ctx, ns, "desk"); vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("delete while alice holds desk-3: %v; want EConflict", err)
	}
	if got := members(); got != "desk-1,desk-3" {
		t.Fatalf("members after the refusals: %s; want both kept", got)
	}
	if l, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: "desk-3"}); err != nil || l.Holder != "alice" {
		t.Fatalf("alice's Lease after the refusals: %+v, %v", l, err)
	}
	if l, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: "desk-1"}); err == nil {
		t.Errorf("desk-1 still has the removal's Lease %+v after the refusal; want it given back", l)
	}
	if err := leases.Delete(ctx, alices); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeletePool(ctx, ns, "desk"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	var list kubevirtv1.VirtualMachineList
	if err := s.admin.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{vdi.LabelPool: "desk"}); err != nil || len(list.Items) != 0 {
		t.Errorf("VMs after delete: %d, %v; want none", len(list.Items), err)
	}
	for _, m := range []string{"desk-1", "desk-2", "desk-3"} {
		if l, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: m}); err == nil {
			t.Errorf("Lease of %s after delete: %+v; want none", m, l)
		}
	}
}
