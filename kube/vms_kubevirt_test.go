package kube_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// kubeVirtSetup is a cluster of its own with KubeVirt's real control plane
// (virt-api's webhooks, virt-controller, the garbage collector, the CSI
// snapshot-controller) and the CSI driver stand-in, the portal acting as
// its ServiceAccount under deploy/rbac.yaml.
type kubeVirtSetup struct {
	c     *testcluster.Cluster
	kv    *testcluster.KubeVirt
	ctx   context.Context
	ns    string
	admin client.WithWatch
	vms   *kube.VMs
}

func newKubeVirtSetup(t *testing.T, opts testcluster.KubeVirtOptions) *kubeVirtSetup {
	t.Helper()
	c := testcluster.MustStart(t)
	kv := c.StartKubeVirt(t, opts)
	c.StartCSIDriver(t)
	c.Apply(t, "../deploy/rbac.yaml")
	vms, err := kube.NewVMs(c.PortalServiceAccount(t), "")
	if err != nil {
		t.Fatal(err)
	}
	s := &kubeVirtSetup{c: c, kv: kv, ctx: context.Background(), admin: c.AdminClient(t), vms: vms}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("virt-controller's log ends:\n%s", lastLines(kv.Log("virt-controller"), 40))
		}
	})
	return s
}

// lastLines returns the last n lines of s that are not cert-manager noise.
func lastLines(s string, n int) string {
	var lines []string
	for l := range strings.SplitSeq(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, "cert-manager.go") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// disk makes a Bound PVC on class, as a golden VM's disk is once it ran.
func (s *kubeVirtSetup) disk(t *testing.T, name, class string, owner *kubevirtv1.VirtualMachine) *corev1.PersistentVolumeClaim {
	t.Helper()
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name,
		Annotations: map[string]string{testcluster.AnnSelectedNode: "node-1"}},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if owner != nil {
		pvc.OwnerReferences = []metav1.OwnerReference{{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine", Name: owner.Name, UID: owner.UID}}
	}
	if err := s.admin.Create(s.ctx, pvc); err != nil {
		t.Fatal(err)
	}
	s.waitFor(t, 30*time.Second, "PVC "+name+" Bound", func() (bool, error) {
		err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(pvc), pvc)
		return err == nil && pvc.Status.Phase == corev1.ClaimBound, err
	})
	return pvc
}

// golden creates a stopped golden VM with one disk per claim, as an admin
// would with kubectl, and waits until KubeVirt reports it Stopped.
func (s *kubeVirtSetup) golden(t *testing.T, name string, mutate func(*kubevirtv1.VirtualMachine), claims ...string) *kubevirtv1.VirtualMachine {
	t.Helper()
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: name, Labels: map[string]string{"app": "desktop"}},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{
				Resources: kubevirtv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			}}}}}
	for i, claim := range claims {
		vol := fmt.Sprintf("disk%d", i)
		vm.Spec.Template.Spec.Domain.Devices.Disks = append(vm.Spec.Template.Spec.Domain.Devices.Disks,
			kubevirtv1.Disk{Name: vol, DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
		vm.Spec.Template.Spec.Volumes = append(vm.Spec.Template.Spec.Volumes, kubevirtv1.Volume{Name: vol, VolumeSource: kubevirtv1.VolumeSource{
			PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}})
	}
	if mutate != nil {
		mutate(vm)
	}
	if err := s.admin.Create(s.ctx, vm); err != nil {
		t.Fatalf("create golden VM %s: %v", name, err)
	}
	s.waitFor(t, 30*time.Second, "golden VM "+name+" Stopped", func() (bool, error) {
		err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(vm), vm)
		return err == nil && vm.Status.PrintableStatus == kubevirtv1.VirtualMachineStatusStopped, err
	})
	return vm
}

func (s *kubeVirtSetup) waitFor(t *testing.T, timeout time.Duration, what string, ok func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		done, err := ok()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s: %v", timeout, what, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// members returns the pool's member names, sorted.
func (s *kubeVirtSetup) members(t *testing.T, pool string) []string {
	t.Helper()
	var list kubevirtv1.VirtualMachineList
	if err := s.admin.List(s.ctx, &list, client.InNamespace(s.ns), client.MatchingLabels{vdi.LabelPool: pool}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, vm := range list.Items {
		if vm.DeletionTimestamp == nil {
			out = append(out, vm.Name)
		}
	}
	slices.Sort(out)
	return out
}

// goldenDisksIntact checks that the golden VM's PVCs are there with no owner but
// the ones they started with.
func (s *kubeVirtSetup) goldenDisksIntact(t *testing.T, golden *kubevirtv1.VirtualMachine, pvcs ...*corev1.PersistentVolumeClaim) {
	t.Helper()
	for _, want := range pvcs {
		var got corev1.PersistentVolumeClaim
		if err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(want), &got); err != nil {
			t.Fatalf("golden PVC %s: %v; want it kept", want.Name, err)
		}
		if got.DeletionTimestamp != nil {
			t.Fatalf("golden PVC %s is being deleted", got.Name)
		}
		for _, o := range got.OwnerReferences {
			if o.UID != golden.UID {
				t.Fatalf("golden PVC %s is owned by %s %s; want no owner but the golden VM", got.Name, o.Kind, o.Name)
			}
		}
	}
}

// TestVMPoolOnKubeVirt runs pools on KubeVirt's own controllers and
// webhooks, one cluster for all its subtests, each in its own namespace.
func TestVMPoolOnKubeVirt(t *testing.T) {
	base := newKubeVirtSetup(t, testcluster.KubeVirtOptions{FeatureGates: []string{"Snapshot", "VMPersistentState"}})
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *kubeVirtSetup)
	}{
		{"Lifecycle", testKubeVirtLifecycle},
		{"Refusals", testKubeVirtRefusals},
		{"WaitForFirstConsumer", testKubeVirtWFFC},
		{"AttackGoldenVMCarriesPortalKeys", testKubeVirtAttackGoldenKeys},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := *base
			s.ns = base.c.Namespace(t)
			tc.run(t, &s)
		})
	}
}

// testKubeVirtLifecycle: a pool made from a golden VM with a disk it owns
// and one it does not, grown, a member recreated, shrunk and deleted;
// every member's disks are its own and go with it, and the golden VM's
// PVCs stay, unowned by any member.
func testKubeVirtLifecycle(t *testing.T, s *kubeVirtSetup) {
	// The golden VM must exist before the PVC it owns.
	golden := s.golden(t, "golden", nil, "golden-root", "golden-data")
	root := s.disk(t, "golden-root", testcluster.StorageClassDefault, golden)
	data := s.disk(t, "golden-data", testcluster.StorageClassDefault, nil)

	pool := vdi.Pool{Namespace: s.ns, Name: "desk", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "golden", Size: 4,
		Policy: vdi.Policy{DisconnectGrace: time.Minute}, Access: vdi.Access{Users: []string{"alice", "bob"}}}
	if err := s.vms.CreatePool(s.ctx, pool); err != nil {
		t.Fatalf("create a pool of 4: %v", err)
	}
	if got, want := s.members(t, "desk"), []string{"desk-1", "desk-2", "desk-3", "desk-4"}; !slices.Equal(got, want) {
		t.Fatalf("members %v; want %v", got, want)
	}
	var m kubevirtv1.VirtualMachine
	if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "desk-1"}, &m); err != nil {
		t.Fatal(err)
	}
	if m.Labels["app"] != "desktop" || m.Annotations[kube.AnnotationMode] != "ephemeral" ||
		!strings.Contains(m.Annotations[kube.AnnotationPolicy], "disconnectGrace") || !strings.Contains(m.Annotations[kube.AnnotationAccess], "alice") {
		t.Errorf("desk-1 labels %v annotations %v; want the golden VM's labels and the pool's mode, policy and access", m.Labels, m.Annotations)
	}
	for _, vol := range m.Spec.Template.Spec.Volumes {
		if c := vol.PersistentVolumeClaim; c != nil && (c.ClaimName == root.Name || c.ClaimName == data.Name) {
			t.Errorf("desk-1 mounts golden PVC %s; want its own", c.ClaimName)
		}
	}
	s.goldenDisksIntact(t, golden, root, data)

	if err := s.vms.ResizePool(s.ctx, s.ns, "desk", 6, func(string) bool { return false }); err != nil {
		t.Fatalf("grow to 6: %v", err)
	}
	if got := s.members(t, "desk"); len(got) != 6 {
		t.Fatalf("members %v; want 6", got)
	}
	if err := s.vms.Recreate(s.ctx, vdi.Ref{Namespace: s.ns, Name: "desk-2"}); err != nil {
		t.Fatalf("recreate desk-2: %v", err)
	}
	if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "desk-2"}, &m); err != nil || m.Annotations[kube.AnnotationSource] != "golden" {
		t.Fatalf("desk-2 after recreate: %v, annotations %v", err, m.Annotations)
	}
	if err := s.vms.ResizePool(s.ctx, s.ns, "desk", 2, func(string) bool { return false }); err != nil {
		t.Fatalf("shrink to 2: %v", err)
	}
	if got := s.members(t, "desk"); len(got) != 2 {
		t.Fatalf("members %v; want 2", got)
	}
	if err := s.vms.DeletePool(s.ctx, s.ns, "desk"); err != nil {
		t.Fatalf("delete the pool: %v", err)
	}
	// The garbage collector deletes each member's disks with it.
	s.waitFor(t, 60*time.Second, "the members' disks to go", func() (bool, error) {
		var list corev1.PersistentVolumeClaimList
		if err := s.admin.List(s.ctx, &list, client.InNamespace(s.ns)); err != nil {
			return false, err
		}
		var left []string
		for _, p := range list.Items {
			if p.Name != root.Name && p.Name != data.Name && p.DeletionTimestamp == nil {
				left = append(left, p.Name)
			}
		}
		return len(left) == 0, fmt.Errorf("left: %v", left)
	})
	s.goldenDisksIntact(t, golden, root, data)
}

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
		vm.Spec.RunStrategy = &always
		if err := s.admin.Update(s.ctx, vm); err != nil {
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
		var kv kubevirtv1.KubeVirt
		key := client.ObjectKey{Namespace: testcluster.KubeVirtNamespace, Name: "kubevirt"}
		if err := s.admin.Get(s.ctx, key, &kv); err != nil {
			t.Fatal(err)
		}
		gates := kv.Spec.Configuration.DeveloperConfiguration.FeatureGates
		kv.Spec.Configuration.DeveloperConfiguration.FeatureGates = []string{"VMPersistentState"}
		if err := s.admin.Update(s.ctx, &kv); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := s.admin.Get(s.ctx, key, &kv); err == nil {
				kv.Spec.Configuration.DeveloperConfiguration.FeatureGates = gates
				s.admin.Update(s.ctx, &kv)
			}
		})
		refusedOneLine(t, "KubeVirt without its Snapshot gate", create("p", "gated", 1), vdi.EInvalid,
			"KubeVirt "+testcluster.KubeVirtVersion, "Snapshot feature gate", "featureGates of KubeVirt kubevirt/kubevirt")
		s.nothingCloned(t, "KubeVirt without its Snapshot gate")
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
		if err := s.admin.Get(s.ctx, client.ObjectKeyFromObject(g), g); err != nil {
			t.Fatal(err)
		}
		spec := &g.Spec.Template.Spec
		spec.Domain.Devices.Disks = append(spec.Domain.Devices.Disks, kubevirtv1.Disk{Name: "extra", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{Bus: kubevirtv1.DiskBusVirtio}}})
		spec.Volumes = append(spec.Volumes, kubevirtv1.Volume{Name: "extra", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
			PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: extra.Name}}}})
		if err := s.admin.Update(s.ctx, g); err != nil {
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
	for _, p := range pvcs {
		p.Annotations[testcluster.AnnSelectedNode] = "node-1"
		if err := s.admin.Update(s.ctx, &p); err != nil {
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
	if err := s.vms.ResizePool(s.ctx, s.ns, "lazy", 3, func(string) bool { return false }); err != nil {
		t.Fatalf("grow to 3: %v", err)
	}
	if got := snaps(); slices.Contains(got, first[0]) || len(got) != 1 {
		t.Errorf("snapshots after growing %v; want %s swept (its disks are Bound) and the new one kept for lazy-3's disk", got, first[0])
	}
	s.goldenDisksIntact(t, g, root)
}
