package kube_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testKubeVirtLateClones: a pool limited to alice is made by a client that
// gives up (a gateway's cut, a closed tab) while KubeVirt is slow to
// finish its clones (virt-api hangs), so the portal never sees them
// finish. Every member KubeVirt makes carries the pool's access
// and policy from its first moment (encoded in the clone's patches), so
// bob never sees nor claims the pool; a member whose definition is then
// taken away by hand, or a pool whose members all lose it, is for admins
// only until the reclaim loop (or an admin) writes it back.
func testKubeVirtLateClones(t *testing.T, s *kubeVirtSetup) {
	s.golden(t, "golden", nil)
	leases := mustLeases(t, s.c.PortalServiceAccount(t))
	svc := newService(s.vms, leases)
	root := vdi.Identity{Login: "root", Admin: true}
	alice, bob := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	ctx := s.ctx

	// The clones are made, then virt-api hangs (its webhooks admit the
	// restores' VMs), and the client gives up: the portal never sees them
	// finish, and KubeVirt finishes them once virt-api answers again; but
	// late-2's clone is not marked done (its restore makes late-2 all the
	// same) until ChangeOvertakesLateClone asks for a fresh one. The hold
	// is in force before the pool is made, so the create never sees
	// late-2's clone finish: the late path is taken every time (where
	// the hold came a moment late, a loaded machine's KubeVirt finished
	// the clone first).
	release := holdCloneDone(t, s, "late-2")
	defer release()
	pool := vdi.Pool{Namespace: s.ns, Name: "late", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 4,
		Policy: vdi.Policy{Record: true}, Access: vdi.Access{Users: []string{"alice"}}}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	created := make(chan error, 1)
	go func() { created <- s.vms.CreatePool(cctx, pool) }() // the backend as a cut request leaves it
	s.waitFor(t, 20*time.Second, "the 4 clones made", func() (bool, error) {
		var clones clonev1beta1.VirtualMachineCloneList
		err := s.admin.List(ctx, &clones, client.InNamespace(s.ns))
		return err == nil && len(clones.Items) == 4, err
	})
	mustHeld(t, s, "late-2")
	s.kv.FreezeVirtAPI(t)
	time.Sleep(time.Second)
	cancel()
	err := <-created
	s.kv.ThawVirtAPI()
	if err == nil {
		t.Fatal("the pool was made whole though late-2's clone was held short of done; want the create cut short")
	}
	t.Logf("create cut short: %v", err)
	s.waitFor(t, 120*time.Second, "4 members", func() (bool, error) { return len(s.members(t, "late")) == 4, nil })
	if a := s.vm(t, "late-2").Annotations[kube.AnnotationAccess]; !strings.HasPrefix(a, "base64url.") {
		t.Fatalf("late-2, whose clone the portal never saw finish, carries %s=%q; want its clone's planned (encoded) one", kube.AnnotationAccess, a)
	}
	t.Log("the late path: late-2 made by a clone the portal never saw finish")

	mustRestricted := func(when string) {
		t.Helper()
		p, err := s.vms.Pool(ctx, s.ns, "late")
		if err != nil || p.Closed != "" || !slices.Equal(p.Access.Users, []string{"alice"}) || !p.Policy.Record {
			t.Fatalf("%s: pool read as %+v, %v; want alice's, recorded, not closed", when, p, err)
		}
		pools, err := svc.Pools(ctx, bob)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pools {
			if p.Name == "late" {
				t.Errorf("%s: bob lists pool late (%+v); want it hidden from him", when, p.Access)
			}
		}
		if d, err := svc.Claim(ctx, bob, s.ns, "late"); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("%s: bob's claim: %+v, %v; want EForbidden", when, d, err)
		}
	}
	mustRestricted("members the portal never saw finish")
	for _, m := range s.members(t, "late") {
		vm := s.vm(t, m)
		if a := vm.Annotations[kube.AnnotationAccess]; a == "" {
			t.Errorf("%s carries no %s; want the pool's, from its clone", m, kube.AnnotationAccess)
		}
	}

	// The reclaim loop writes the definition as plain JSON.
	if _, err := s.vms.RepairDefinitions(ctx); err != nil {
		t.Fatalf("repair: %v", err)
	}
	for _, m := range s.members(t, "late") {
		vm := s.vm(t, m)
		var doc struct{ Access vdi.Access }
		if err := json.Unmarshal([]byte(vm.Annotations[kube.AnnotationAccess]), &doc); err != nil || !slices.Equal(doc.Access.Users, []string{"alice"}) ||
			!strings.Contains(vm.Annotations[kube.AnnotationPolicy], `"record":true`) {
			t.Errorf("%s after the repair: %s=%q, %s=%q; want alice's access and the recorded policy as JSON", m,
				kube.AnnotationAccess, vm.Annotations[kube.AnnotationAccess], kube.AnnotationPolicy, vm.Annotations[kube.AnnotationPolicy])
		}
	}

	t.Run("ChangeOvertakesLateClone", func(t *testing.T) { testLateCloneOvertaken(t, s, svc, release) })

	t.Run("AttackMemberWithoutItsAccess", func(t *testing.T) {
		// A member that lost its definition (a hand edit, a clone by an
		// older portal) is read by itself as open to everyone: the pool
		// must not be read from it, and it is closed (no claim takes it:
		// TestServiceClaim/ClosedMemberIsNotClaimed).
		strip(t, s, "late-1")
		mustRestricted("late-1 stripped")
		ms, err := s.vms.Members(ctx, s.ns, "late")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if (m.Closed != "") != (m.Name == "late-1") {
				t.Errorf("member %s closed %q; want only late-1 closed", m.Name, m.Closed)
			}
		}
		if n, err := s.vms.RepairDefinitions(ctx); err != nil || n != 1 {
			t.Fatalf("repair: %d members, %v; want late-1 written", n, err)
		}
		if a := s.vm(t, "late-1").Annotations[kube.AnnotationAccess]; !strings.Contains(a, `"alice"`) {
			t.Errorf("late-1 after the repair: %s=%q; want alice's", kube.AnnotationAccess, a)
		}
	})

	t.Run("AttackResetInClosedPool", func(t *testing.T) { testResetInClosedPool(t, s, svc, leases) })

	t.Run("AttackPoolWithoutItsAccess", func(t *testing.T) {
		// Every member lost it: nothing says whom the pool is for, so it
		// is for admins only, and the admin is told why.
		for _, m := range s.members(t, "late") {
			strip(t, s, m)
		}
		p, err := s.vms.Pool(ctx, s.ns, "late")
		if err != nil || p.Closed == "" || p.Allows(alice) || p.Allows(bob) || !p.Allows(root) {
			t.Fatalf("pool whose members carry no access: %+v, %v; want closed to all but admins", p, err)
		}
		if _, err := svc.Claim(ctx, alice, s.ns, "late"); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice's claim on the closed pool: %v; want EForbidden", err)
		}
		if err := s.vms.ResizePool(ctx, s.ns, "late", 5, func(string) bool { return false }); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("growing the closed pool: %v; want EConflict (new members would not know whom they are for)", err)
		}
		if err := svc.UpdatePool(ctx, root, s.ns, "late", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice"}}}); err != nil {
			t.Fatalf("admin sets the access again: %v", err)
		}
		if p, err := s.vms.Pool(ctx, s.ns, "late"); err != nil || p.Closed != "" || !p.Allows(alice) || p.Allows(bob) {
			t.Errorf("after the admin set it again: %+v, %v; want alice's pool", p, err)
		}
	})
}

// strip removes a member's access and policy, as a hand edit would.
func strip(t *testing.T, s *kubeVirtSetup, member string) {
	t.Helper()
	if err := testcluster.Update(s.ctx, s.admin, s.vm(t, member), func(vm *kubevirtv1.VirtualMachine) {
		delete(vm.Annotations, kube.AnnotationAccess)
		delete(vm.Annotations, kube.AnnotationPolicy)
	}); err != nil {
		t.Fatalf("strip %s: %v", member, err)
	}
}

// vm reads a VM in the setup's namespace.
func (s *kubeVirtSetup) vm(t *testing.T, name string) *kubevirtv1.VirtualMachine {
	t.Helper()
	var vm kubevirtv1.VirtualMachine
	if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: name}, &vm); err != nil {
		t.Fatal(err)
	}
	return &vm
}

// testLateCloneOvertaken: an admin's change overtakes a clone that
// outlives the portal's wait, on KubeVirt's own controllers. The pool is
// widened to alice and bob; late-2 is made fresh (its first clone, whose
// restore made it, not yet marked done: it must not be waited on once
// late-2 is deleted, as KubeVirt never finishes it then), and just before
// its clone is asked for (its plan taken, its old VM gone) the admin
// narrows the pool to alice; the portal's wait is then cut, and KubeVirt
// lands the clone with the plan's definition, bob's included. The pool
// reads as the admin set it, never closed; late-2 alone is closed, saying
// why; bob's claim is refused; the reclaim loop writes alice's on it.
func testLateCloneOvertaken(t *testing.T, s *kubeVirtSetup, svc *vdi.Service, release func()) {
	ctx := s.ctx
	root, alice, bob := vdi.Identity{Login: "root", Admin: true}, vdi.Identity{Login: "alice"}, vdi.Identity{Login: "bob"}
	if err := svc.UpdatePool(ctx, root, s.ns, "late", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice", "bob"}}}); err != nil {
		t.Fatalf("the admin widens the pool to bob: %v", err)
	}
	old := s.vm(t, "late-2").UID
	first := s.clonesOf(t, "late-2")
	if len(first) != 1 || first[0].Status.Phase == clonev1beta1.Succeeded {
		t.Fatalf("late-2's clones before it is made fresh: %+v; want its first, not marked done", first)
	}
	rctx, cut := context.WithCancel(ctx)
	defer cut()
	var asked, narrowed bool
	cfg := rest.CopyConfig(s.c.PortalServiceAccount(t))
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if !strings.Contains(req.URL.Path, "/virtualmachineclones") {
				return rt.RoundTrip(req)
			}
			switch {
			case req.Method == http.MethodPost && !narrowed:
				narrowed = true
				if c := s.clonesOf(t, "late-2"); len(c) != 0 {
					t.Errorf("late-2's clones when a fresh one is asked for: %+v; want its first, which made the deleted late-2, gone", c)
				}
				release() // the fresh clone may finish
				if err := svc.UpdatePool(ctx, root, s.ns, "late", vdi.PoolUpdate{Access: &vdi.Access{Users: []string{"alice"}}}); err != nil {
					t.Errorf("the admin narrows the pool to alice while late-2 is made fresh: %v", err)
				}
				asked = true
			case asked && req.Method == http.MethodGet:
				cut() // the portal's wait ends (its replica died, its request was cut)
				return nil, context.Canceled
			}
			return rt.RoundTrip(req)
		})
	}
	racing, err := kube.NewVMs(kube.Config{REST: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := racing.Recreate(rctx, vdi.Ref{Namespace: s.ns, Name: "late-2"}); err == nil || !asked {
		t.Fatalf("late-2 made fresh with its wait cut: %v (clone asked for: %t); want the clone left going", err, asked)
	}
	s.waitFor(t, 2*time.Minute, "KubeVirt to land late-2's clone", func() (bool, error) {
		var vm kubevirtv1.VirtualMachine
		err := s.admin.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: "late-2"}, &vm)
		return err == nil && vm.UID != old && vm.Labels[vdi.LabelPool] == "late", client.IgnoreNotFound(err)
	})
	if a := s.vm(t, "late-2").Annotations[kube.AnnotationAccess]; !strings.HasPrefix(a, "base64url.") {
		t.Fatalf("the late late-2 carries %s=%q; want its clone's planned (encoded) one, as KubeVirt lands it", kube.AnnotationAccess, a)
	}
	p, err := s.vms.Pool(ctx, s.ns, "late")
	if err != nil || p.Closed != "" || p.Allows(bob) || !p.Allows(alice) || !p.Policy.Record {
		t.Errorf("pool late with a member planned before the admin's change: %+v %+v (closed %q), %v; want alice's, recorded, not closed", p.Access, p.Policy, p.Closed, err)
	}
	ms, err := s.vms.Members(ctx, s.ns, "late")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if (m.Closed != "") != (m.Name == "late-2") || m.Closed != "" && !strings.Contains(m.Closed, "planned with") {
			t.Errorf("member %s closed %q; want only the late late-2 closed, saying it carries its plan's", m.Name, m.Closed)
		}
	}
	if d, err := svc.Claim(ctx, bob, s.ns, "late"); vdi.ErrorCode(err) != vdi.EForbidden {
		t.Errorf("bob's claim with a late member that still names him: %+v, %v; want EForbidden", d, err)
	}
	if n, err := s.vms.RepairDefinitions(ctx); err != nil || n != 1 {
		t.Fatalf("the reclaim loop's repair: %d members written, %v; want late-2", n, err)
	}
	var doc struct{ Access vdi.Access }
	if a := s.vm(t, "late-2").Annotations[kube.AnnotationAccess]; json.Unmarshal([]byte(a), &doc) != nil || !slices.Equal(doc.Access.Users, []string{"alice"}) {
		t.Errorf("late-2 after the repair: %s=%q; want alice's as JSON", kube.AnnotationAccess, a)
	}
}

// holdCloneDone has the API server refuse KubeVirt's writes that mark a
// clone of target done (CreatingTargetVM, Succeeded), as a clone
// controller that has not yet seen its restore's VM leaves it: the
// restore still makes the VM. It returns once the API server refuses
// them, with what lets them through again (also when the test ends): a
// ValidatingAdmissionPolicy on the clones' status in the setup's
// namespace.
func holdCloneDone(t *testing.T, s *kubeVirtSetup, target string) (release func()) {
	t.Helper()
	return testcluster.Refuse(t, s.admin, testcluster.Refusal{
		Name:       "hold-clones-" + s.ns,
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Group:      clonev1beta1.SchemeGroupVersion.Group,
		Resource:   "virtualmachineclones/status",
		Namespace:  s.ns,
		Allow: "object.metadata.?labels[?'" + kube.LabelCloneTarget + "'].orValue('') != '" + target + "' || " +
			"!(object.?status.?phase.orValue('') in ['CreatingTargetVM', 'Succeeded'])",
		Message: "the test holds the clones of " + target + " short of done",
	})
}

// mustHeld fails unless target has one clone, not done, that the API
// server refuses to mark done (holdCloneDone), asked with a dry run.
func mustHeld(t *testing.T, s *kubeVirtSetup, target string) {
	t.Helper()
	cs := s.clonesOf(t, target)
	if len(cs) != 1 || cs[0].Status.Phase == clonev1beta1.Succeeded {
		t.Fatalf("the clones of %s: %+v; want one, not done", target, cs)
	}
	err := s.admin.Status().Patch(s.ctx, &cs[0], client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Succeeded"}}`)), client.DryRunAll)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("marking the clone of %s done (a dry run): %v; want it refused by the test's hold", target, err)
	}
}

// clonesOf lists the VirtualMachineClones of target in the setup's namespace.
func (s *kubeVirtSetup) clonesOf(t *testing.T, target string) []clonev1beta1.VirtualMachineClone {
	t.Helper()
	var list clonev1beta1.VirtualMachineCloneList
	if err := s.admin.List(s.ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{kube.LabelCloneTarget: target}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}
