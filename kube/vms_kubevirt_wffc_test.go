package kube_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testKubeVirtWFFC: a golden disk on a WaitForFirstConsumer class. The
// members' restored disks stay Pending until each member first runs, so
// the shared snapshot stays until then; once they bind (the CSI driver
// provisions them from it) a later snapshot of the golden VM sweeps it.
func testKubeVirtWFFC(t *testing.T, s *kubeVirtSetup) {
	// A golden VM with no labels at all: the pool's label still reaches
	// its members (see kube.LabelGolden).
	g := s.golden(t, "wffc", func(vm *kubevirtv1.VirtualMachine) { vm.Labels = nil }, "wffc-root")
	root := s.disk(t, "wffc-root", testcluster.StorageClassWFFC, nil)
	if err := s.vms.CreatePool(s.ctx, vdi.Pool{Namespace: s.ns, Name: "lazy", Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "wffc", Size: 2}); err != nil {
		t.Fatalf("create a pool of 2 on a WaitForFirstConsumer class: %v", err)
	}
	restored := func() []corev1.PersistentVolumeClaim {
		var list corev1.PersistentVolumeClaimList
		if err := s.admin.List(s.ctx, &list, client.InNamespace(s.ns)); err != nil {
			t.Fatal(err)
		}
		var out []corev1.PersistentVolumeClaim
		for _, p := range list.Items {
			if p.Name != root.Name {
				out = append(out, p)
			}
		}
		return out
	}
	snaps := func() []string {
		var list snapshotv1beta1.VirtualMachineSnapshotList
		if err := s.admin.List(s.ctx, &list, client.InNamespace(s.ns)); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, sn := range list.Items {
			if sn.DeletionTimestamp == nil {
				out = append(out, sn.Name)
			}
		}
		return out
	}
	if got := s.members(t, "lazy"); !slices.Equal(got, []string{"lazy-1", "lazy-2"}) {
		t.Fatalf("members %v; want lazy-1 and lazy-2", got)
	}
	pvcs := restored()
	if len(pvcs) != 2 {
		t.Fatalf("%d restored disks; want 2", len(pvcs))
	}
	for _, p := range pvcs {
		if p.Status.Phase == corev1.ClaimBound {
			t.Fatalf("restored disk %s is Bound before any member ran; want it waiting for its first consumer", p.Name)
		}
	}
	first := snaps()
	if len(first) != 1 {
		t.Fatalf("snapshots %v; want the shared one kept while the members' disks wait", first)
	}
	// Each member's first start: the scheduler picks a node for its disk.
	onNode1 := func(p *corev1.PersistentVolumeClaim) {
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[testcluster.AnnSelectedNode] = "node-1"
	}
	for _, p := range pvcs {
		if err := testcluster.Update(s.ctx, s.admin, &p, onNode1); err != nil {
			t.Fatal(err)
		}
	}
	s.waitFor(t, 30*time.Second, "the members' disks to be provisioned from the kept snapshot", func() (bool, error) {
		for _, p := range restored() {
			if p.Status.Phase != corev1.ClaimBound {
				return false, fmt.Errorf("%s is %s", p.Name, p.Status.Phase)
			}
		}
		return true, nil
	})
	bindAll := func() {
		t.Helper()
		for _, p := range restored() {
			if p.Annotations[testcluster.AnnSelectedNode] == "" {
				if err := testcluster.Update(s.ctx, s.admin, &p, onNode1); err != nil {
					t.Fatal(err)
				}
			}
		}
		s.waitFor(t, 30*time.Second, "every member's disk Bound", func() (bool, error) {
			for _, p := range restored() {
				if p.Status.Phase != corev1.ClaimBound {
					return false, fmt.Errorf("%s is %s", p.Name, p.Status.Phase)
				}
			}
			return true, nil
		})
	}
	// The golden VM has not changed: growing clones from the same snapshot.
	if err := s.vms.ResizePool(s.ctx, s.ns, "lazy", 3, func(string) bool { return false }); err != nil {
		t.Fatalf("grow to 3: %v", err)
	}
	if got := snaps(); !slices.Equal(got, first) {
		t.Fatalf("snapshots after growing %v; want %v reused (the golden VM is as it was)", got, first)
	}
	bindAll()
	// The admin changes the golden VM: the next member needs a snapshot of
	// the new state, and the old one goes once nothing needs it. The
	// sweep deletes; KubeVirt's snapshot controller lets the object go
	// once its finalizer is done, a moment later.
	if err := testcluster.Update(s.ctx, s.admin, g, func(g *kubevirtv1.VirtualMachine) {
		g.Spec.Template.Spec.Domain.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("256Mi")
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.vms.ResizePool(s.ctx, s.ns, "lazy", 4, func(string) bool { return false }); err != nil {
		t.Fatalf("grow to 4: %v", err)
	}
	s.waitFor(t, 30*time.Second, "the old snapshot swept and the new one kept", func() (bool, error) {
		if got := snaps(); slices.Contains(got, first[0]) || len(got) != 1 {
			return false, fmt.Errorf("snapshots after changing the golden VM and growing %v; want %s swept (its disks are Bound) and the new one kept for lazy-4's disk", got, first[0])
		}
		return true, nil
	})
	s.goldenDisksIntact(t, g, root)
}
