package kube_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// releases is how many ephemeral releases releasesTakeOneSnapshot makes.
const releases = 20

// releasesTakeOneSnapshot makes the members of pool, of size members,
// fresh releases times as its ephemeral releases do (Recreate), one at a
// time per member and all members at once, on KubeVirt's own controllers:
// the golden VM has not changed since the pool was made, so every clone
// restores the one VirtualMachineSnapshot taken then, and no storage
// snapshot is cut for any of them.
func (s *kubeVirtSetup) releasesTakeOneSnapshot(t *testing.T, pool string, members int) {
	t.Helper()
	snapBefore, volumesBefore := s.snapshots(t)
	if len(snapBefore) != 1 {
		t.Fatalf("golden snapshots once the pool is made: %v; want one", snapBefore)
	}
	next := make(chan int, releases)
	for i := range releases {
		next <- i
	}
	close(next)
	begin := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, releases)
	for i := range members {
		ref := vdi.Ref{Namespace: s.ns, Name: fmt.Sprintf("%s-%d", pool, i+1)}
		wg.Go(func() {
			for range next {
				if err := s.vms.Recreate(s.ctx, ref); err != nil {
					errs <- fmt.Errorf("recreate %s: %w", ref.Name, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("%d ephemeral releases, %d members at once: %s", releases, members, time.Since(begin).Round(time.Second))
	if got := s.members(t, pool); len(got) != members {
		t.Fatalf("members after %d releases: %v; want %d", releases, got, members)
	}
	snapAfter, volumesAfter := s.snapshots(t)
	if len(snapAfter) != 1 || snapAfter[0] != snapBefore[0] || volumesAfter != volumesBefore {
		t.Errorf("after %d releases: golden snapshots %v, volume snapshots %d; want the pool's one, %s, and its %d volume snapshots",
			releases, snapAfter, volumesAfter, snapBefore[0], volumesBefore)
	}
}

// snapshots returns the names and UIDs of the portal's snapshots of
// golden in the setup's namespace, and how many VolumeSnapshots it has.
func (s *kubeVirtSetup) snapshots(t *testing.T) ([]string, int) {
	t.Helper()
	var snaps snapshotv1beta1.VirtualMachineSnapshotList
	if err := s.admin.List(s.ctx, &snaps, client.InNamespace(s.ns), client.MatchingLabels{kube.LabelSnapshotOf: "golden"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sn := range snaps.Items {
		out = append(out, sn.Name+" "+string(sn.UID))
	}
	volumes := &unstructured.UnstructuredList{}
	volumes.SetGroupVersionKind(schema.GroupVersionKind{Group: "snapshot.storage.k8s.io", Version: "v1", Kind: "VolumeSnapshotList"})
	if err := s.admin.List(s.ctx, volumes, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	return out, len(volumes.Items)
}
