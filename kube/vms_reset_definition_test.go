package kube_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testDefinitionDuringReset: the definition a member made fresh carries
// is its pool's when the reset makes it, not when the claim ended. An
// admin widens pool chg's access and changes its policy while chg-1's
// re-clone is under way (held): chg-1 comes back with them, and the pool
// is not closed by members that disagree. A claim left with no plan (it
// ran out; a mark written before plans existed is reset the same way)
// is reset from the definition as it reads then; once that cannot be read
// (the members disagree, and the member carries no access of its own),
// the reclaim loop refuses it: nothing deleted, the claim kept, the
// refusal counted.
func testDefinitionDuringReset(t *testing.T, s *vmSetup, standIn *testcluster.KubeVirtStandIn, svc *vdi.Service, leases vdi.Leases) {
	ctx, admin := s.ctx, s.admin
	ns := s.c.Namespace(t)
	testcluster.StoppedVM(t, admin, ns, "golden", nil)
	root, alice, bob := vdi.Identity{Login: "root", Admin: true}, vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	if err := s.vms.CreatePool(ctx, vdi.Pool{Namespace: ns, Name: "chg", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 2,
		Access: vdi.Access{Users: []string{"alice"}}, Policy: vdi.Policy{DisconnectGrace: time.Minute}}); err != nil {
		t.Fatalf("create pool chg: %v", err)
	}
	vm := func(name string) *kubevirtv1.VirtualMachine {
		t.Helper()
		var vm kubevirtv1.VirtualMachine
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
			t.Fatalf("VM %s: %v", name, err)
		}
		return &vm
	}
	waitFor := func(what string, cond func() error) {
		t.Helper()
		var err error
		for end := time.Now().Add(3 * time.Minute); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
			if err = cond(); err == nil {
				return
			}
		}
		t.Fatalf("waited 3 min for %s: %v", what, err)
	}
	// madeAgain waits until ref's claim is gone and its VM is a new one
	// of pool chg, and returns it.
	madeAgain := func(ref vdi.Ref, old types.UID, loop bool) *kubevirtv1.VirtualMachine {
		t.Helper()
		waitFor(ref.Name+" made again and its claim let go", func() error {
			if loop {
				if _, err := svc.ReclaimDue(ctx); err != nil {
					return err
				}
			}
			if _, err := leases.Get(ctx, ref); !errors.Is(err, vdi.ErrNotFound) {
				return fmt.Errorf("the claim is still there (%v)", err)
			}
			var now kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &now); err != nil {
				return err
			}
			if now.UID == old || now.Labels[vdi.LabelPool] != "chg" {
				return fmt.Errorf("VM %s uid %s labels %v; want a new member of chg", ref.Name, now.UID, now.Labels)
			}
			return nil
		})
		return vm(ref.Name)
	}
	mustCarry := func(when string, m *kubevirtv1.VirtualMachine, users []string, policy string) {
		t.Helper()
		if a, p := m.Annotations[kube.AnnotationAccess], m.Annotations[kube.AnnotationPolicy]; strings.Contains(a, `"bob"`) != slices.Contains(users, "bob") ||
			!strings.Contains(a, `"alice"`) || !strings.Contains(p, policy) {
			t.Errorf("%s: %s carries %s=%q, %s=%q; want access %v and a policy with %s", when, m.Name, kube.AnnotationAccess, a, kube.AnnotationPolicy, p, users, policy)
		}
		p, err := s.vms.Pool(ctx, ns, "chg")
		if err != nil || p.Closed != "" || p.Allows(bob) != slices.Contains(users, "bob") || !p.Allows(alice) {
			t.Errorf("%s: pool chg read as %+v (closed %q), %v; want access %v, not closed", when, p.Access, p.Closed, err, users)
		}
	}
	claim := func(member string, at time.Time, d time.Duration) {
		t.Helper()
		if _, err := leases.Create(ctx, &vdi.Lease{Namespace: ns, Member: member, Pool: "chg", Holder: "alice",
			AcquireTime: at, RenewTime: at, Duration: d}); err != nil {
			t.Fatalf("alice's claim on %s: %v", member, err)
		}
	}

	// The access and policy change while chg-1's re-clone is held.
	chg1 := vdi.Ref{Namespace: ns, Name: "chg-1"}
	old := vm(chg1.Name).UID
	claim(chg1.Name, time.Now(), time.Hour)
	standIn.HoldClones(ns)
	t.Cleanup(func() { standIn.ReleaseClones(ns) })
	if err := svc.Release(ctx, alice, chg1, ""); err != nil {
		t.Fatalf("alice's release of chg-1: %v", err)
	}
	waitFor("chg-1 deleted and its clone asked for", func() error {
		var clones clonev1beta1.VirtualMachineCloneList
		if err := admin.List(ctx, &clones, client.InNamespace(ns)); err != nil || len(clones.Items) == 0 {
			return fmt.Errorf("%d clones, %v", len(clones.Items), err)
		}
		var now kubevirtv1.VirtualMachine
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: chg1.Name}, &now); !apierrors.IsNotFound(err) {
			return fmt.Errorf("chg-1: %v; want it gone while its clone is held", err)
		}
		return nil
	})
	if err := svc.UpdatePool(ctx, root, ns, "chg", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice", "bob"}}, Policy: &vdi.Policy{Record: true}}); err != nil {
		t.Fatalf("the admin widens the access and sets a policy during the reset: %v", err)
	}
	standIn.ReleaseClones(ns)
	mustCarry("after a change during its re-clone", madeAgain(chg1, old, false), []string{"alice", "bob"}, `"record":true`)

	// A claim that ran out, with no plan on it: reset from the definition
	// as it reads when the loop resets it.
	chg2 := vdi.Ref{Namespace: ns, Name: "chg-2"}
	old = vm(chg2.Name).UID
	claim(chg2.Name, time.Now().Add(-2*time.Hour), time.Minute)
	if err := svc.UpdatePool(ctx, root, ns, "chg", vdi.PoolUpdate{Policy: &vdi.Policy{IdleTimeout: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	mustCarry("a claim with no plan, reset by the loop", madeAgain(chg2, old, true), []string{"alice", "bob"}, `"idleTimeout"`)

	// The definition cannot be read (no member carries it: stripped by
	// hand) and chg-2 carries no access of its own: the loop deletes
	// nothing.
	for _, name := range []string{"chg-1", "chg-2"} {
		m := vm(name)
		delete(m.Annotations, kube.AnnotationAccess)
		delete(m.Annotations, kube.AnnotationPolicy)
		if err := admin.Update(ctx, m); err != nil {
			t.Fatalf("strip %s: %v", name, err)
		}
	}
	if p, err := s.vms.Pool(ctx, ns, "chg"); err != nil || p.Closed == "" {
		t.Fatalf("pool chg with no member carrying its definition: %+v, %v; want it closed", p, err)
	}
	old = vm(chg2.Name).UID
	claim(chg2.Name, time.Now().Add(-2*time.Hour), time.Minute)
	before := svc.Counters().ReclaimsRefused[vdi.RuleExpired]
	if _, err := svc.ReclaimDue(ctx); err != nil {
		t.Fatalf("reclaim: %v", err)
	}
	if got := svc.Counters().ReclaimsRefused[vdi.RuleExpired]; got != before+1 {
		t.Errorf("refused reclaims (lease-expired): %d; want %d", got, before+1)
	}
	if got := vm(chg2.Name).UID; got != old {
		t.Errorf("chg-2 deleted and made again (uid %s, was %s) with no readable definition", got, old)
	}
	if l, err := leases.Get(context.Background(), chg2); err != nil || l.Annotations[vdi.AnnotationReclaiming] != "" {
		t.Errorf("alice's run-out claim on chg-2 after a refused reclaim: %+v, %v; want it kept, unmarked", l, err)
	}
}
