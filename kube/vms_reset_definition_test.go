package kube_test

import (
	"context"
	"encoding/base64"
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
// is not closed by members that disagree. A re-clone that outlives the
// portal's wait lands with its plan's definition after the admin
// narrowed it: the pool reads as the admin set it, the late member is
// closed until the reclaim loop writes the pool's on it, and a change of
// one part writes the whole definition on a member still carrying its
// plan's. A claim left with no plan (it
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

	// recloneHeld waits until ref's VM is gone and its clone, held, is
	// asked for.
	recloneHeld := func(ref vdi.Ref) {
		t.Helper()
		waitFor(ref.Name+" deleted and its clone asked for", func() error {
			var clones clonev1beta1.VirtualMachineCloneList
			if err := admin.List(ctx, &clones, client.InNamespace(ns), client.MatchingLabels{kube.LabelCloneTarget: ref.Name}); err != nil ||
				!slices.ContainsFunc(clones.Items, func(c clonev1beta1.VirtualMachineClone) bool { return c.Status.Phase != clonev1beta1.Succeeded }) {
				return fmt.Errorf("no unfinished clone of %s among %d, %v", ref.Name, len(clones.Items), err)
			}
			var now kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, &now); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: %v; want it gone while its clone is held", ref.Name, err)
			}
			return nil
		})
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
	recloneHeld(chg1)
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

	// A re-clone that outlives the portal's wait (its replica gone, or no
	// progress for CloneTimeout) lands later with the definition it was
	// planned with, alice's and bob's, while the admin narrowed the access
	// to alice and changed the policy on chg-2 meanwhile: the pool reads
	// as the admin set it, never closed; the late chg-1 takes no claim
	// until the reclaim loop writes the pool's definition on it.
	old = vm(chg1.Name).UID
	standIn.HoldClones(ns)
	cctx, cancel := context.WithCancel(ctx)
	recreated := make(chan error, 1)
	go func() { recreated <- s.vms.Recreate(cctx, chg1) }() // the backend: the portal's wait, cut
	recloneHeld(chg1)
	cancel()
	if err := <-recreated; vdi.ErrorCode(err) != vdi.EUnavailable || !strings.Contains(err.Error(), "has not finished") {
		t.Fatalf("a re-clone whose wait was cut: %v; want EUnavailable, the clone going on", err)
	}
	if err := svc.UpdatePool(ctx, root, ns, "chg", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice"}}, Policy: &vdi.Policy{MaxSession: 2 * time.Hour}}); err != nil {
		t.Fatalf("the admin narrows the access and sets a policy while chg-1's clone is late: %v", err)
	}
	standIn.ReleaseClones(ns)
	late := madeAgain(chg1, old, false)
	if a := late.Annotations[kube.AnnotationAccess]; !strings.HasPrefix(a, "base64url.") {
		t.Fatalf("the late chg-1 carries %s=%q; want its clone's planned (encoded) one, as KubeVirt lands it", kube.AnnotationAccess, a)
	}
	listed := func(what string, ok func(m vdi.Member) bool) {
		t.Helper()
		waitFor("the portal's cache to list "+what, func() error {
			ms, err := s.vms.Members(ctx, ns, "chg")
			if err != nil || !slices.ContainsFunc(ms, ok) {
				return fmt.Errorf("members %+v, %v", ms, err)
			}
			return nil
		})
	}
	listed("the late chg-1", func(m vdi.Member) bool { return m.Name == chg1.Name })
	p, err := s.vms.Pool(ctx, ns, "chg")
	if err != nil || p.Closed != "" || p.Allows(bob) || !p.Allows(alice) || p.Policy.MaxSession != 2*time.Hour {
		t.Errorf("pool chg with a late member planned before the admin's change: %+v %+v (closed %q), %v; want alice's, max session 2h, not closed",
			p.Access, p.Policy, p.Closed, err)
	}
	ms, err := s.vms.Members(ctx, ns, "chg")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if (m.Closed != "") != (m.Name == chg1.Name) || m.Closed != "" && !strings.Contains(m.Closed, "planned with") {
			t.Errorf("member %s closed %q; want only the late chg-1 closed until its definition is written, saying it carries its plan's", m.Name, m.Closed)
		}
	}
	if d, err := svc.Claim(ctx, bob, ns, "chg"); vdi.ErrorCode(err) != vdi.EForbidden {
		t.Errorf("bob's claim with a late member that still names him: %+v, %v; want EForbidden", d, err)
	}
	if n, err := s.vms.RepairDefinitions(ctx); err != nil || n < 1 {
		t.Errorf("the reclaim loop's repair: %d members written, %v; want the late chg-1", n, err)
	}
	mustCarry("a late re-clone, repaired", vm(chg1.Name), []string{"alice"}, `"maxSession"`)
	mustCarry("beside a late re-clone", vm(chg2.Name), []string{"alice"}, `"maxSession"`)

	// A member still carrying its plan when the admin changes one part
	// of the definition gets the whole of it, not that part on top of
	// its plan's: it agrees with the others at once.
	plan := "base64url." + base64.RawURLEncoding.EncodeToString([]byte(`{"access":{"users":["alice","bob"]},"limits":{}}`))
	if err := testcluster.Update(ctx, admin, vm(chg1.Name), func(m *kubevirtv1.VirtualMachine) { m.Annotations[kube.AnnotationAccess] = plan }); err != nil {
		t.Fatal(err)
	}
	listed("chg-1 closed, carrying its plan", func(m vdi.Member) bool { return m.Name == chg1.Name && m.Closed != "" })
	if err := svc.UpdatePool(ctx, root, ns, "chg", vdi.PoolUpdate{Policy: &vdi.Policy{MaxSession: 3 * time.Hour}}); err != nil {
		t.Fatal(err)
	}
	mustCarry("a planned member after a change of policy alone", vm(chg1.Name), []string{"alice"}, `"maxSession":10800000000000`)

	// The definition cannot be read (no member carries it: stripped by
	// hand) and chg-2 carries no access of its own: the loop deletes
	// nothing.
	for _, name := range []string{"chg-1", "chg-2"} {
		if err := testcluster.Update(ctx, admin, vm(name), func(m *kubevirtv1.VirtualMachine) {
			delete(m.Annotations, kube.AnnotationAccess)
			delete(m.Annotations, kube.AnnotationPolicy)
		}); err != nil {
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
