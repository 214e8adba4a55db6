package kube_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
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
	csi   *testcluster.CSIDriver
	ctx   context.Context
	ns    string
	admin client.WithWatch
	vms   *kube.VMs
}

func newKubeVirtSetup(t *testing.T, opts testcluster.KubeVirtOptions) *kubeVirtSetup {
	t.Helper()
	c := testcluster.MustStart(t)
	kv := c.StartKubeVirt(t, opts)
	csi := c.StartCSIDriver(t)
	c.Apply(t, "../deploy/rbac.yaml")
	vms, err := kube.NewVMs(kube.Config{REST: c.PortalServiceAccount(t)})
	if err != nil {
		t.Fatal(err)
	}
	s := &kubeVirtSetup{c: c, kv: kv, csi: csi, ctx: context.Background(), admin: c.AdminClient(t), vms: vms}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("virt-controller's log (restarted %d times) ends:\n%s", kv.Restarts("virt-controller"), kv.Tail("virt-controller", 40))
		}
	})
	return s
}

// lastLines returns the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
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
		{"LateClonesFailClosed", testKubeVirtLateClones},
		{"Jobs", testKubeVirtJobs},
		{"Node", testKubeVirtNode}, // last: its kubelet binds every Pod
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
	s.releasesTakeOneSnapshot(t, "desk", 6)
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
