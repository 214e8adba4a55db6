package kube_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// refusedOneLine checks that err is a vdi.Error with code whose message is
// one line and, with its hint, says each of want.
func refusedOneLine(t *testing.T, what string, err error, code vdi.Code, want ...string) {
	t.Helper()
	var ve *vdi.Error
	if !errors.As(err, &ve) || ve.Code != code {
		t.Fatalf("%s: %v; want a refusal with code %s", what, err, code)
	}
	if strings.Contains(ve.Msg, "\n") || strings.Contains(ve.Hint, "\n") {
		t.Errorf("%s: message %q hint %q; want one line each", what, ve.Msg, ve.Hint)
	}
	for _, w := range want {
		if !strings.Contains(ve.Msg+" "+ve.Hint, w) {
			t.Errorf("%s: %q / %q; want it to say %q", what, ve.Msg, ve.Hint, w)
		}
	}
}

// nothingCloned checks that no snapshot or clone exists in the namespace.
func (s *kubeVirtSetup) nothingCloned(t *testing.T, what string) {
	t.Helper()
	var snaps snapshotv1beta1.VirtualMachineSnapshotList
	var clones clonev1beta1.VirtualMachineCloneList
	if err := s.admin.List(s.ctx, &snaps, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	if err := s.admin.List(s.ctx, &clones, client.InNamespace(s.ns)); err != nil {
		t.Fatal(err)
	}
	if len(snaps.Items)+len(clones.Items) > 0 {
		t.Errorf("%s: %d snapshots and %d clones made; want none before the refusal", what, len(snaps.Items), len(clones.Items))
	}
}

// testKubeVirtRefusals: bad input, each refused (or failed) with one line
// that names the cause and the fix, and no golden PVC ever gets an owner.
func testKubeVirtRefusals(t *testing.T, s *kubeVirtSetup) {
	yes := true
	create := func(name, source string, size int) error {
		return s.vms.CreatePool(s.ctx, vdi.Pool{Namespace: s.ns, Name: name, Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: source, Size: size})
	}
	t.Run("GoldenMissing", func(t *testing.T) {
		refusedOneLine(t, "a missing golden VM", create("p", "nope", 1), vdi.ENotFound, "Golden VM nope not found")
	})
	t.Run("GoldenRunning", func(t *testing.T) {
		vm := s.golden(t, "running", nil)
		always := kubevirtv1.RunStrategyAlways
		run := func(vm *kubevirtv1.VirtualMachine) { vm.Spec.RunStrategy = &always }
		if err := testcluster.Update(s.ctx, s.admin, vm, run); err != nil {
			t.Fatal(err)
		}
		s.waitFor(t, 30*time.Second, "KubeVirt to start it", func() (bool, error) {
			err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(vm), vm)
			if err == nil {
				err = fmt.Errorf("status %+v", vm.Status)
			}
			return vm.Status.PrintableStatus != kubevirtv1.VirtualMachineStatusStopped, err
		})
		refusedOneLine(t, "a running golden VM", create("p", "running", 1), vdi.EInvalid, "Stop the golden VM first")
	})
	t.Run("PersistentTPM", func(t *testing.T) {
		s.golden(t, "tpm", func(vm *kubevirtv1.VirtualMachine) {
			vm.Spec.Template.Spec.Domain.Devices.TPM = &kubevirtv1.TPMDevice{Persistent: &yes}
		})
		refusedOneLine(t, "a golden VM with a persistent TPM", create("p", "tpm", 1), vdi.EInvalid, "persistent TPM", "cannot restore")
	})
	t.Run("PersistentEFI", func(t *testing.T) {
		s.golden(t, "efi", func(vm *kubevirtv1.VirtualMachine) {
			no := false
			vm.Spec.Template.Spec.Domain.Firmware = &kubevirtv1.Firmware{Bootloader: &kubevirtv1.Bootloader{EFI: &kubevirtv1.EFI{SecureBoot: &no, Persistent: &yes}}}
		})
		refusedOneLine(t, "a golden VM with a persistent EFI", create("p", "efi", 1), vdi.EInvalid, "persistent EFI")
	})
	t.Run("DiskWithoutSnapshots", func(t *testing.T) {
		g := s.golden(t, "nosnap", nil, "nosnap-root")
		root := s.disk(t, "nosnap-root", testcluster.StorageClassNoSnap, nil)
		refusedOneLine(t, "a golden disk on a class without snapshots", create("p", "nosnap", 2), vdi.EInvalid,
			"nosnap-root", testcluster.StorageClassNoSnap, "no VolumeSnapshotClass", "Create a VolumeSnapshotClass with driver "+testcluster.CSIDriverNoSnap)
		s.nothingCloned(t, "a golden disk on a class without snapshots")
		s.goldenDisksIntact(t, g, root)
	})
	t.Run("NoSnapshotGate", func(t *testing.T) {
		s.golden(t, "gated", nil)
		kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: testcluster.KubeVirtNamespace, Name: "kubevirt"}}
		var gates []string
		if err := testcluster.Update(s.ctx, s.admin, kv, func(kv *kubevirtv1.KubeVirt) {
			gates = kv.Spec.Configuration.DeveloperConfiguration.FeatureGates
			kv.Spec.Configuration.DeveloperConfiguration.FeatureGates = []string{"VMPersistentState"}
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			testcluster.Update(s.ctx, s.admin, kv, func(kv *kubevirtv1.KubeVirt) {
				kv.Spec.Configuration.DeveloperConfiguration.FeatureGates = gates
			})
		})
		refusedOneLine(t, "KubeVirt without its Snapshot gate", create("p", "gated", 1), vdi.EInvalid,
			"KubeVirt "+testcluster.KubeVirtVersion, "Snapshot feature gate", "featureGates of KubeVirt kubevirt/kubevirt")
		s.nothingCloned(t, "KubeVirt without its Snapshot gate")
		// Under OpenShift Virtualization's operator an edit of the KubeVirt
		// CR is undone: the hint names the HyperConverged CR instead.
		if err := testcluster.Update(s.ctx, s.admin, kv, func(kv *kubevirtv1.KubeVirt) {
			if kv.Labels == nil {
				kv.Labels = map[string]string{}
			}
			kv.Labels["app.kubernetes.io/managed-by"] = "hco-operator"
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			testcluster.Update(s.ctx, s.admin, kv, func(kv *kubevirtv1.KubeVirt) { delete(kv.Labels, "app.kubernetes.io/managed-by") })
		})
		refusedOneLine(t, "KubeVirt under HCO without its Snapshot gate", create("p", "gated", 1), vdi.EInvalid,
			"Snapshot feature gate", "HyperConverged", "kubevirt.kubevirt.io/jsonpatch")
	})
	t.Run("CloneKubeVirtRefuses", func(t *testing.T) {
		// An unfinished clone an older portal left (whole-map patches with
		// JSON values, which KubeVirt's restore admission refuses): the
		// grow that takes it over fails with KubeVirt's reason at once.
		g := s.golden(t, "old", nil, "old-root")
		root := s.disk(t, "old-root", testcluster.StorageClassDefault, nil)
		if err := create("old", "old", 1); err != nil {
			t.Fatal(err)
		}
		group, vmGroup := "kubevirt.io", "kubevirt.io"
		left := &clonev1beta1.VirtualMachineClone{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: "old-2-clone-left", Labels: map[string]string{kube.LabelCloneTarget: "old-2"}},
			Spec: clonev1beta1.VirtualMachineCloneSpec{
				Source:  &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: "VirtualMachine", Name: "old"},
				Target:  &corev1.TypedLocalObjectReference{APIGroup: &vmGroup, Kind: "VirtualMachine", Name: "old-2"},
				Patches: []string{`{"op":"add","path":"/metadata/annotations","value":{"corral.dev/vdi-policy":"{\"disconnectGrace\":1}"}}`}}}
		if err := s.admin.Create(s.ctx, left); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err := s.vms.ResizePool(s.ctx, s.ns, "old", 2, func(string) bool { return false })
		refusedOneLine(t, "growing onto a clone KubeVirt refuses", err, vdi.EUnavailable, "KubeVirt: ", "patching is valid only for elements under /spec/")
		if d := time.Since(start); d > kube.CloneTimeout {
			t.Errorf("the refused clone took %v to report; want it failed, not waited out", d)
		}
		if got := s.members(t, "old"); !slices.Equal(got, []string{"old-1"}) {
			t.Errorf("members %v; want old-1 alone", got)
		}
		s.goldenDisksIntact(t, g, root)
	})
	t.Run("ExcludedVolume", func(t *testing.T) {
		// A golden VM that gains a disk on a class without snapshots after
		// its pool was made: recreating a member refuses the snapshot that
		// leaves the disk out, before any clone, and keeps the member.
		g := s.golden(t, "grows", nil, "grows-root")
		root := s.disk(t, "grows-root", testcluster.StorageClassDefault, nil)
		if err := create("grows", "grows", 1); err != nil {
			t.Fatal(err)
		}
		extra := s.disk(t, "grows-extra", testcluster.StorageClassNoSnap, nil)
		if err := testcluster.Update(s.ctx, s.admin, g, func(g *kubevirtv1.VirtualMachine) {
			spec := &g.Spec.Template.Spec
			spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "extra", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
			spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: "extra", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
				PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: extra.Name}}}})
		}); err != nil {
			t.Fatal(err)
		}
		var before kubevirtv1.VirtualMachine
		if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "grows-1"}, &before); err != nil {
			t.Fatal(err)
		}
		err := s.vms.Recreate(s.ctx, vdi.Ref{Namespace: s.ns, Name: "grows-1"})
		refusedOneLine(t, "recreating from a snapshot that leaves a disk out", err, vdi.EInvalid, "extra", "left out of its snapshot", "VolumeSnapshotClass")
		var after kubevirtv1.VirtualMachine
		if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "grows-1"}, &after); err != nil || after.UID != before.UID {
			t.Errorf("grows-1 after the refusal: %v (uid %s, was %s); want the old member kept", err, after.UID, before.UID)
		}
		s.goldenDisksIntact(t, g, root, extra)
	})
}
