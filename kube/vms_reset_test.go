package kube_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// diesAfterDelete plays a portal that dies right after a reset deleted
// its member's VM, before the clone that makes it again was asked for:
// its resets (Grow, Recreate) delete the VM, wait until it is gone, then
// hang until their context ends.
type diesAfterDelete struct {
	*kube.VMs
	s       *kubeVirtSetup
	deleted chan types.UID // the UID of the VM it deleted
	resets  atomic.Int32
}

func (d *diesAfterDelete) Grow(ctx context.Context, g vdi.Growth, _ func(vdi.Progress)) error {
	return d.die(ctx, g.Members[0])
}

func (d *diesAfterDelete) Recreate(ctx context.Context, ref vdi.Ref) error {
	return d.die(ctx, ref.Name)
}

func (d *diesAfterDelete) die(ctx context.Context, name string) error {
	d.resets.Add(1)
	var vm kubevirtv1.VirtualMachine
	key := client.ObjectKey{Namespace: d.s.ns, Name: name}
	if err := d.s.admin.Get(ctx, key, &vm); err != nil {
		return err
	}
	if err := d.s.admin.Delete(ctx, &vm, client.Preconditions{UID: &vm.UID}); err != nil {
		return err
	}
	for {
		var now kubevirtv1.VirtualMachine
		if err := d.s.admin.Get(ctx, key, &now); apierrors.IsNotFound(err) {
			break
		} else if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	d.deleted <- vm.UID
	<-ctx.Done()
	return ctx.Err()
}

// testResetTakeover: a replica releasing alice's ephemeral member dies
// right after deleting its VM; the replica that finishes the reclaim
// makes the member again, from its pool's golden VM and with its pool's
// access (never open), rather than letting the claim go with the member
// lost. mustOwnMembers checks the pool's n members and their access.
func testResetTakeover(t *testing.T, s *kubeVirtSetup, leases vdi.Leases, mustOwnMembers func(*testing.T, int)) {
	n := len(s.members(t, "desk"))
	ref := vdi.Ref{Namespace: s.ns, Name: "desk-2"}
	now := time.Now()
	if _, err := leases.Create(s.ctx, &vdi.Lease{Namespace: s.ns, Member: ref.Name, Pool: "desk", Holder: "alice",
		AcquireTime: now, RenewTime: now, Duration: time.Hour}); err != nil {
		t.Fatalf("alice's claim on %s: %v", ref, err)
	}
	dying := &diesAfterDelete{VMs: s.vms, s: s, deleted: make(chan types.UID, 1)}
	first := newService(dying, leases)
	t.Cleanup(first.StopJobs)
	// The release answers while the reset goes on (the backend here never
	// ends it): nothing a user waits for is bounded by a gateway's timeout.
	alice := vdi.Identity{Login: "alice"}
	rctx, cancel := context.WithCancel(s.ctx)
	t.Cleanup(cancel)
	released := make(chan error, 1)
	go func() { released <- first.Release(rctx, alice, ref, "") }()
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("alice's release: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("alice's release still waits for its reset after 3 min; want it answered while the reset goes on")
	}
	var old types.UID
	select {
	case old = <-dying.deleted:
	case <-time.After(3 * time.Minute):
		t.Fatalf("the reset after alice's release did not delete %s within 3 min", ref)
	}
	// Meanwhile the member is not alice's any more, nor anybody's, and a
	// second release starts no second reset.
	mine, err := first.Desktops(s.ctx, alice, false)
	if err != nil || len(mine) != 0 {
		t.Errorf("alice's desktops while hers is reset: %+v, %v; want none", mine, err)
	}
	// Admins see it as resetting, held by nobody — listed although its VM
	// is gone, so the pool does not look a member smaller.
	admin := vdi.Identity{Login: "ops", Admin: true}
	all, err := first.Desktops(s.ctx, admin, true)
	all = slices.DeleteFunc(all, func(d vdi.Desktop) bool { return d.Pool != "desk" })
	if err != nil || len(all) != n || !resettingIn(all, ref) {
		t.Errorf("pool desk while %s is reset: %+v, %v; want %d members, %s resetting (release) with no holder", ref, all, err, n, ref)
	}
	if err := first.Release(s.ctx, alice, ref, ""); err != nil {
		t.Errorf("alice releases again while it is reset: %v; want nothing more to do", err)
	}
	if n := dying.resets.Load(); n != 1 {
		t.Errorf("%d resets of %s; want 1", n, ref)
	}
	first.StopJobs() // the replica dies: no word, no renewal of the mark
	l, err := leases.Get(s.ctx, ref)
	if err != nil || l.Annotations[vdi.AnnotationReclaiming] == "" {
		t.Fatalf("%s's claim after its replica died mid-reset: %+v, %v; want it kept, marked", ref, l, err)
	}

	// Another replica's reclaim loop, once the mark is stale, finishes
	// the reset.
	second := staleMarkReplica(t, s.ctx, s.vms, leases)
	s.waitFor(t, 4*time.Minute, ref.Name+" made again and its claim let go", func() (bool, error) {
		if _, err := second.ReclaimDue(s.ctx); err != nil {
			t.Logf("reclaim: %v", err)
		}
		var vm kubevirtv1.VirtualMachine
		err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: ref.Name}, &vm)
		if err != nil {
			return false, err
		}
		if _, err := leases.Get(s.ctx, ref); !errors.Is(err, vdi.ErrNotFound) {
			return false, errors.New("the claim is still there")
		}
		return vm.UID != old && vm.Labels[vdi.LabelPool] == "desk", nil
	})
	vm := s.vm(t, ref.Name)
	if vm.Annotations[kube.AnnotationSource] != "golden" || vm.Annotations[kube.AnnotationMode] != string(vdi.ModeEphemeral) {
		t.Errorf("%s made again with annotations %v; want the pool's golden VM and mode", ref, vm.Annotations)
	}
	mustOwnMembers(t, n)
	ms, err := s.vms.Members(s.ctx, s.ns, "desk")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Name == ref.Name && m.Closed != "" {
			t.Errorf("%s made again is closed: %s; want it claimable by the pool's users", ref, m.Closed)
		}
	}
	if _, err := second.ClaimStarting(s.ctx, vdi.Identity{Login: "bob"}, s.ns, "desk"); vdi.ErrorCode(err) != vdi.EForbidden {
		t.Errorf("bob, outside the pool, claims from it: %v; want EForbidden", err)
	}
}

// resettingIn reports whether ds lists ref as being reset after a
// release, held by nobody.
func resettingIn(ds []vdi.Desktop, ref vdi.Ref) bool {
	for _, d := range ds {
		if d.Ref() == ref {
			return d.Resetting == "release" && d.Holder == ""
		}
	}
	return false
}

// staleMarkReplica returns another replica's claim service whose reclaim
// loop has seen the claims' marks once and whose clock then plays the
// 30 s to when they are stale (unchanged since it saw them).
func staleMarkReplica(t *testing.T, ctx context.Context, back vdi.Backend, leases vdi.Leases) *vdi.Service {
	t.Helper()
	var ahead atomic.Int64
	svc := vdi.NewService(vdi.Config{Backend: back, Leases: leases, Audit: nopAudit{}, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }})
	t.Cleanup(svc.StopJobs)
	if _, err := svc.ReclaimDue(ctx); err != nil {
		t.Logf("reclaim: %v", err)
	}
	ahead.Store(int64(31 * time.Second))
	return svc
}
