package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMPoolClonesQueue makes pools where clones take time and queue as in
// KubeVirt (the stand-in: one snapshot locks a VM at a time): clones of the
// golden VM itself run one after another, so the pool clones members from
// one snapshot of it instead; a pool of 8 is made, 4 ephemeral members are
// recreated at once and none is lost, even when a clone outlives its wait.
func TestVMPoolClonesQueue(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	const snapshot, restore = time.Second, 2 * time.Second
	standIn.SlowClones(ns, snapshot, restore)
	testcluster.StoppedVM(t, admin, ns, "golden", map[string]string{"os": "linux"})

	t.Run("ClonesOfAVMQueue", func(t *testing.T) {
		begin := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Go(func() { errs[i] = vms.Clone(ctx, ns, "golden", "direct-"+string(rune('a'+i))) })
		}
		wg.Wait()
		took := time.Since(begin)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("two clones of the golden VM itself: %s (each snapshot %s under the VM's lock, restore %s)", took.Round(time.Millisecond), snapshot, restore)
		if took < 2*snapshot+restore {
			t.Errorf("two clones of one VM took %s; want at least %s: their snapshots queue on the VM's lock", took, 2*snapshot+restore)
		}
	})

	svc, _ := s.service(t)
	root := vdi.Identity{Login: "root", Admin: true}
	// The restores wait until the test has seen them side by side: as many
	// at once as the portal clones at a time, each from the one snapshot.
	standIn.HoldClones(ns)
	t.Cleanup(func() { standIn.ReleaseClones(ns) })
	begin := time.Now()
	created := make(chan error, 1)
	go func() {
		created <- svc.CreatePool(ctx, root, vdi.Pool{Namespace: ns, Name: "big", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 8,
			Access: vdi.Access{Users: []string{"alice"}}, Policy: vdi.Policy{Record: true}})
	}()
	eventually(t, 2*time.Minute, func() string {
		var list clonev1beta1.VirtualMachineCloneList
		if err := admin.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err.Error()
		}
		var restoring, sources []string
		for _, c := range list.Items {
			if c.Status.Phase == clonev1beta1.RestoreInProgress && c.Spec.Source != nil && c.Spec.Target != nil && strings.HasPrefix(c.Spec.Target.Name, "big-") {
				restoring = append(restoring, c.Spec.Target.Name)
				if src := c.Spec.Source.Kind + "/" + c.Spec.Source.Name; !slices.Contains(sources, src) {
					sources = append(sources, src)
				}
			}
		}
		if len(restoring) < kube.CloneConcurrency || len(sources) != 1 || !strings.HasPrefix(sources[0], "VirtualMachineSnapshot/") {
			return fmt.Sprintf("restores of the pool of 8 under way at once: %v, from %v; want %d side by side, from one snapshot", restoring, sources, kube.CloneConcurrency)
		}
		return ""
	})
	standIn.ReleaseClones(ns)
	if err := <-created; err != nil {
		t.Fatalf("create a pool of 8: %v", err)
	}
	t.Logf("pool of 8: %s (one snapshot %s, then restores of %s, %d at a time, held until seen)", time.Since(begin).Round(time.Millisecond), snapshot, restore, kube.CloneConcurrency)
	if got := memberNames(t, vms, ns, "big"); len(got) != 8 {
		t.Fatalf("members after create: %v; want 8", got)
	}
	var vm kubevirtv1.VirtualMachine
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "big-8"}, &vm); err != nil || vm.Labels["os"] != "linux" || vm.Annotations[kube.AnnotationMode] != "ephemeral" {
		t.Errorf("big-8: labels %v, annotations %v, %v; want the golden VM's labels and the pool's", vm.Labels, vm.Annotations, err)
	}
	snap := mustNoLeftovers(t, admin, ns, "golden")

	t.Run("FourRecreatesAtOnce", func(t *testing.T) {
		before := map[string]types.UID{}
		for _, name := range []string{"big-1", "big-2", "big-3", "big-4"} {
			var vm kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil {
				t.Fatal(err)
			}
			before[name] = vm.UID
		}
		begin := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for name := range before {
			wg.Go(func() {
				if err := vms.Recreate(ctx, vdi.Ref{Namespace: ns, Name: name}); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		t.Logf("4 recreates at once: %s", time.Since(begin).Round(time.Millisecond))
		for _, err := range errs {
			t.Error(err)
		}
		if got := memberNames(t, vms, ns, "big"); len(got) != 8 {
			t.Fatalf("members after 4 recreates: %v; want all 8", got)
		}
		for name, uid := range before {
			var vm kubevirtv1.VirtualMachine
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &vm); err != nil || vm.UID == uid || vm.Labels[vdi.LabelPool] != "big" {
				t.Errorf("%s after recreate: uid %s (was %s), labels %v, %v; want a new member of big", name, vm.UID, uid, vm.Labels, err)
			}
		}
		// Every recreate clones from the pool's snapshot: the golden VM has
		// not changed since it was taken.
		if got := mustNoLeftovers(t, admin, ns, "golden"); got != snap || snap == "" {
			t.Errorf("the golden VM's snapshot after 4 recreates is %q; want %q, taken once when the pool was made", got, snap)
		}
	})

	t.Run("RecreateOutlivesItsWait", func(t *testing.T) {
		standIn.HoldClones(ns)
		cctx, cancel := context.WithTimeout(ctx, snapshot+3*time.Second)
		defer cancel()
		err := vms.Recreate(cctx, vdi.Ref{Namespace: ns, Name: "big-5"})
		if err == nil || !strings.Contains(err.Error(), "has not finished") {
			t.Fatalf("recreate whose clone does not finish in time: %v; want an error saying it goes on", err)
		}
		standIn.ReleaseClones(ns)
		deadline := time.Now().Add(20 * time.Second)
		for len(memberNames(t, vms, ns, "big")) != 8 {
			if time.Now().After(deadline) {
				t.Fatalf("members after the late clone: %v; want big-5 back", memberNames(t, vms, ns, "big"))
			}
			time.Sleep(100 * time.Millisecond)
		}
		mustRecordedFor(t, vms, ns, "big", 8, "alice")
	})
}

// mustNoLeftovers fails unless namespace has no VirtualMachineClones and
// one VirtualMachineSnapshot of golden at most (of its current state, kept
// for the next clone), and returns that snapshot's UID.
func mustNoLeftovers(t *testing.T, admin client.Client, namespace, golden string) types.UID {
	t.Helper()
	var clones clonev1beta1.VirtualMachineCloneList
	var snaps snapshotv1beta1.VirtualMachineSnapshotList
	if err := admin.List(context.Background(), &clones, client.InNamespace(namespace)); err != nil || len(clones.Items) != 0 {
		t.Errorf("clones left: %d, %v; want none", len(clones.Items), err)
	}
	if err := admin.List(context.Background(), &snaps, client.InNamespace(namespace), client.MatchingLabels{kube.LabelSnapshotOf: golden}); err != nil || len(snaps.Items) > 1 {
		t.Errorf("snapshots of %s left: %d, %v; want one at most", golden, len(snaps.Items), err)
	}
	if len(snaps.Items) == 0 {
		return ""
	}
	return snaps.Items[0].UID
}
