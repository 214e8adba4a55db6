package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// capacityEnv is a vmSetup with the KubeVirt stand-in, where the tests
// write the cluster's nodes, VMIs and KubeVirt CR as the admin.
type capacityEnv struct{ *vmSetup }

func mustCapacityEnv(t *testing.T) *capacityEnv {
	t.Helper()
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	return &capacityEnv{s}
}

// node writes a ready node (cluster-scoped, so named after the namespace
// and deleted at the end) whose status offers alloc.
func (e *capacityEnv) node(t *testing.T, name string, alloc map[string]int64) string {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name}}
	if err := e.admin.Create(e.ctx, n); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.admin.Delete(context.Background(), n) })
	// The apiserver taints a new node not-ready; with no node controller
	// here, the test plays kubelet and controller: ready, untainted.
	if err := testcluster.Update(e.ctx, e.admin, n, func(n *corev1.Node) { n.Spec.Taints = nil }); err != nil {
		t.Fatal(err)
	}
	if err := testcluster.UpdateStatus(e.ctx, e.admin, n, func(n *corev1.Node) {
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		n.Status.Capacity, n.Status.Allocatable = corev1.ResourceList{}, corev1.ResourceList{}
		for r, q := range alloc {
			n.Status.Capacity[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
			n.Status.Allocatable[corev1.ResourceName(r)] = *resource.NewQuantity(q, resource.DecimalSI)
		}
	}); err != nil {
		t.Fatal(err)
	}
	return n.Name
}

// golden writes a stopped golden VM asking for gpus.
func (e *capacityEnv) golden(t *testing.T, name string, labels map[string]string, gpus ...string) {
	t.Helper()
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Labels: labels},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	for i, g := range gpus {
		vm.Spec.Template.Spec.Domain.Devices.GPUs = append(vm.Spec.Template.Spec.Domain.Devices.GPUs,
			kubevirtv1.GPU{Name: "gpu" + string(rune('a'+i)), DeviceName: g})
	}
	if err := e.admin.Create(e.ctx, vm); err != nil {
		t.Fatal(err)
	}
}

// vmi writes a VMI that KubeVirt has put on node in phase, holding gpus.
func (e *capacityEnv) vmi(t *testing.T, name, node string, phase kubevirtv1.VirtualMachineInstancePhase, gpus ...string) {
	t.Helper()
	v := &kubevirtv1.VirtualMachineInstance{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	for i, g := range gpus {
		v.Spec.Domain.Devices.GPUs = append(v.Spec.Domain.Devices.GPUs, kubevirtv1.GPU{Name: "gpu" + string(rune('a'+i)), DeviceName: g})
	}
	if err := e.admin.Create(e.ctx, v); err != nil {
		t.Fatal(err)
	}
	placed := func(v *kubevirtv1.VirtualMachineInstance) { v.Status.NodeName, v.Status.Phase = node, phase }
	if err := testcluster.UpdateStatus(e.ctx, e.admin, v, placed); err != nil {
		t.Fatal(err)
	}
}

// refused runs call, which must fail with code and an error whose message
// and hint contain every one of want, and checks that no
// VirtualMachineClone was made meanwhile (a watch from before the call sees
// even one made and deleted again) and that the member absent does not
// exist.
func (e *capacityEnv) refused(t *testing.T, absent string, code vdi.Code, call func() error, want ...string) {
	t.Helper()
	var before clonev1beta1.VirtualMachineCloneList
	if err := e.admin.List(e.ctx, &before, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	err := call()
	var ve *vdi.Error
	if !errors.As(err, &ve) || ve.Code != code {
		t.Fatalf("making %s: %v; want a refusal with code %s", absent, err, code)
	}
	for _, w := range want {
		if !strings.Contains(ve.Msg+"\n"+ve.Hint, w) {
			t.Errorf("refused %s with %q, hint %q; want it to say %q", absent, ve.Msg, ve.Hint, w)
		}
	}
	if ve.Hint == "" {
		t.Errorf("refused %s without a hint: %q", absent, ve.Msg)
	}
	ctx, cancel := context.WithTimeout(e.ctx, 500*time.Millisecond)
	defer cancel()
	w, err := e.admin.Watch(ctx, &clonev1beta1.VirtualMachineCloneList{}, client.InNamespace(e.ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: before.ResourceVersion}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for {
		select {
		case ev := <-w.ResultChan():
			if c, ok := ev.Object.(*clonev1beta1.VirtualMachineClone); ok {
				t.Errorf("refused %s: VirtualMachineClone %s was %s; want none made", absent, c.Name, ev.Type)
			}
		case <-ctx.Done():
			var vm kubevirtv1.VirtualMachine
			if err := e.admin.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: absent}, &vm); !apierrors.IsNotFound(err) {
				t.Errorf("refused member %s: %v; want no such VM", absent, err)
			}
			return
		}
	}
}

func (e *capacityEnv) members(t *testing.T, pool string) int {
	t.Helper()
	ms, err := e.vms.Members(e.ctx, e.ns, pool)
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// TestCapacityAdmission creates GPU pools against nodes, VMIs and a KubeVirt
// CR written into the apiserver: PCI passthrough and mediated vGPU
// resources, devices held by running VMIs, a shortfall in total and one of
// per-node fit, growth that counts stopped members. Every refusal comes
// before a VirtualMachineClone exists.
func TestCapacityAdmission(t *testing.T) {
	e := mustCapacityEnv(t)
	// The device classes come from the KubeVirt CR; without the grant the
	// portal still admits by count, but cannot name the classes.
	review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authorizationv1.ResourceAttributes{Group: "kubevirt.io", Resource: "kubevirts", Verb: "list"}}}
	review, err := testcluster.Clientset(t, e.sa).AuthorizationV1().SelfSubjectAccessReviews().Create(e.ctx, review, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	} else if !review.Status.Allowed {
		t.Fatalf("deploy/rbac.yaml does not let the portal list kubevirts.kubevirt.io; GPU admission reads permittedHostDevices from the KubeVirt CR")
	}
	// Resource names are the test's own: the cluster and its nodes are
	// shared with the package's other tests.
	pci, vgpu, pair, unlisted := "corral.test/pci-"+e.ns, "corral.test/vgpu-"+e.ns, "corral.test/pair-"+e.ns, "corral.test/unlisted-"+e.ns
	nsd := "corral.test/nsd-" + e.ns
	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kubevirt"}}
	kv.Spec.Configuration.PermittedHostDevices = &kubevirtv1.PermittedHostDevices{
		PciHostDevices:  []kubevirtv1.PciHostDevice{{PCIVendorSelector: "10DE:2236", ResourceName: pci}, {PCIVendorSelector: "144D:A808", ResourceName: pair, ExternalResourceProvider: true}, {PCIVendorSelector: "10DE:2237", ResourceName: nsd}},
		MediatedDevices: []kubevirtv1.MediatedHostDevice{{MDEVNameSelector: "NVIDIA A10-12Q", ResourceName: vgpu, ExternalResourceProvider: true}},
	}
	if err := e.admin.Create(e.ctx, kv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.admin.Delete(context.Background(), kv) })
	a := e.node(t, "a", map[string]int64{pci: 2, vgpu: 4, pair: 1})
	b := e.node(t, "b", map[string]int64{pci: 1, pair: 1})
	e.node(t, "cpu", nil)
	e.vmi(t, "busy", a, kubevirtv1.Running, pci)
	e.vmi(t, "done", b, kubevirtv1.Succeeded, pci)
	e.golden(t, "gold-pci", nil, pci)
	e.golden(t, "gold-vgpu", nil, vgpu)
	e.golden(t, "gold-pair", nil, pair, pair)
	e.golden(t, "gold-unlisted", nil, unlisted)
	e.golden(t, "gold-plain", nil)
	create := func(name, golden string, size int) error {
		return e.vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: name, Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: golden, Size: size})
	}

	t.Run("ExclusiveInsufficient", func(t *testing.T) {
		e.refused(t, "pci3-1", vdi.EConflict, func() error { return create("pci3", "gold-pci", 3) },
			"3 VMs must be able to run at once", "1 × "+pci+" (PCI passthrough, one whole device per VM)", "the nodes have room for 2",
			"Node "+a+": "+pci+" allocatable 2, held 1, free 1, room for 1.",
			"Node "+b+": "+pci+" allocatable 1, held 0, free 1, room for 1.",
			"size of at most 2")
	})
	t.Run("ExclusiveFits", func(t *testing.T) {
		if err := create("pci2", "gold-pci", 2); err != nil {
			t.Fatalf("a pool of 2 on 2 free passthrough devices: %v", err)
		}
		if n := e.members(t, "pci2"); n != 2 {
			t.Fatalf("pool pci2 has %d members; want 2", n)
		}
	})
	t.Run("GrowCountsStoppedMembers", func(t *testing.T) {
		// pci2's members are stopped: they hold nothing, but each needs a
		// device once started, so a third member does not fit.
		e.refused(t, "pci2-3", vdi.EConflict, func() error { return e.vms.ResizePool(e.ctx, e.ns, "pci2", 3, func(string) bool { return false }) },
			"3 VMs must be able to run at once (1 new and 2 stopped members)", "size of at most 2")
		if n := e.members(t, "pci2"); n != 2 {
			t.Errorf("pool pci2 has %d members after a refused resize; want 2", n)
		}
		// A running member holds its device and needs no more: with
		// pci2-1 running on b, a third member still does not fit, since
		// b's one device is pci2-1's and a's free one is for pci2-2.
		e.vmi(t, "pci2-1", b, kubevirtv1.Running, pci)
		e.refused(t, "pci2-3", vdi.EConflict, func() error { return e.vms.ResizePool(e.ctx, e.ns, "pci2", 3, func(string) bool { return false }) },
			"2 VMs must be able to run at once (1 new and 1 stopped members)", "Node "+b+": "+pci+" allocatable 1, held 1, free 0, room for 0.")
	})
	t.Run("MediatedIsItsOwnResource", func(t *testing.T) {
		// Node a's passthrough device held by busy takes nothing from its
		// four vGPU slices.
		e.refused(t, "vgpu5-1", vdi.EConflict, func() error { return create("vgpu5", "gold-vgpu", 5) },
			"1 × "+vgpu+" (mediated device, a vGPU slice per VM, from an external device plugin)",
			"Node "+a+": "+vgpu+" allocatable 4, held 0, free 4, room for 4.", "other nodes offer none of them", "size of at most 4")
		if err := create("vgpu4", "gold-vgpu", 4); err != nil {
			t.Fatalf("a pool of 4 on 4 free vGPU slices: %v", err)
		}
	})
	t.Run("PerNodeFit", func(t *testing.T) {
		// Two free devices in the cluster, but one on each node: a VM that
		// needs both fits nowhere.
		e.refused(t, "pair-1", vdi.EConflict, func() error { return create("pair", "gold-pair", 1) },
			"2 × "+pair+" (PCI passthrough, one whole device per VM, from an external device plugin)", "the nodes have room for 0",
			"Node "+a+": "+pair+" allocatable 1, held 0, free 1, room for 0.", "Node "+b+": "+pair+" allocatable 1, held 0, free 1, room for 0.")
	})
	t.Run("NoNodesGrant", func(t *testing.T) {
		// A portal bound to a role without nodes list makes pools without
		// devices (they never look at nodes), and for a GPU pool says
		// which grant it lacks rather than failing with an internal error.
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-no-nodes"}, Rules: []rbacv1.PolicyRule{
			// The waits watch what they wait for, as the portal's RBAC allows.
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachines"}, Verbs: []string{"get", "list", "watch", "patch"}},
			{APIGroups: []string{"kubevirt.io"}, Resources: []string{"virtualmachineinstances", "kubevirts"}, Verbs: []string{"get", "list"}},
			{APIGroups: []string{"clone.kubevirt.io"}, Resources: []string{"virtualmachineclones"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{"snapshot.kubevirt.io"}, Resources: []string{"virtualmachinesnapshots"}, Verbs: []string{"get", "list", "watch", "create", "delete"}}}}
		bind := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-no-nodes"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: e.ns + "-no-nodes"}}}
		for _, o := range []client.Object{role, bind} {
			if err := e.admin.Create(e.ctx, o); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.admin.Delete(context.Background(), o) })
		}
		e.c.AwaitAccess(t, e.ns+"-no-nodes", nil, authorizationv1.ResourceAttributes{Namespace: e.ns, Group: "kubevirt.io", Resource: "virtualmachines", Verb: "get"})
		vms, err := kube.NewVMs(kube.Config{REST: e.c.User(t, e.ns+"-no-nodes")})
		if err != nil {
			t.Fatal(err)
		}
		if err := vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: "plain", Kind: vdi.KindVM, Source: "gold-plain", Size: 2}); err != nil {
			t.Errorf("a pool without devices, made by a portal that may not list nodes: %v", err)
		}
		err = vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: "blind", Kind: vdi.KindVM, Source: "gold-pci", Size: 1})
		var ve *vdi.Error
		if !errors.As(err, &ve) || ve.Code != vdi.EUnavailable || !strings.Contains(ve.Msg, "may not list nodes") || !strings.Contains(ve.Hint, "deploy/rbac.yaml") {
			t.Errorf("CreatePool without nodes list: %v; want EUnavailable naming the grant", err)
		}
		// Nor may it start a VM (no update on virtualmachines/start): a
		// claim says which grant, not client-go's "unknown".
		err = vms.AskStart(e.ctx, vdi.Ref{Namespace: e.ns, Name: "plain-1"})
		if !errors.As(err, &ve) || ve.Code != vdi.EUnavailable || !strings.Contains(ve.Msg, "may not update virtualmachines/start") || !strings.Contains(ve.Hint, "deploy/rbac.yaml") {
			t.Errorf("AskStart without update on virtualmachines/start: %v; want EUnavailable naming the grant", err)
		}
	})
	t.Run("NamespacedInstall", func(t *testing.T) { testCapacityNamespaced(t, e, nsd) })
	t.Run("NotPermitted", func(t *testing.T) {
		e.refused(t, "unlisted-1", vdi.EInvalid, func() error { return create("unlisted", "gold-unlisted", 1) },
			"asks for host device "+unlisted+", which KubeVirt does not permit", "permittedHostDevices")
	})
}

// TestLicensingAcknowledgement makes pools of a Windows golden VM: one
// member needs no acknowledgement, three do; a pool made without it cannot
// grow past one member until its members carry the mark.
func TestLicensingAcknowledgement(t *testing.T) {
	e := mustCapacityEnv(t)
	e.golden(t, "win11", map[string]string{"os.template.kubevirt.io/win11": "true"})
	pool := func(name string, size int, ack bool) vdi.Pool {
		return vdi.Pool{Namespace: e.ns, Name: name, Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "win11", Size: size, LicensesAcknowledged: ack}
	}
	if err := e.vms.CreatePool(e.ctx, pool("solo", 1, false)); err != nil {
		t.Fatalf("a Windows pool of one without acknowledgement: %v", err)
	}
	e.refused(t, "trio-1", vdi.EInvalid, func() error { return e.vms.CreatePool(e.ctx, pool("trio", 3, false)) },
		"Golden VM win11 is a Windows VM (label os.template.kubevirt.io/win11)", "would run 3 copies",
		"Windows Enterprise E3/E5", "RDS CALs", `"licensesAcknowledged": true`, "licences box")
	if err := e.vms.CreatePool(e.ctx, pool("trio", 3, true)); err != nil {
		t.Fatalf("a Windows pool of three, acknowledged: %v", err)
	}
	var vm kubevirtv1.VirtualMachine
	if err := e.admin.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: "trio-3"}, &vm); err != nil || vm.Annotations[kube.AnnotationLicenses] != "true" {
		t.Errorf("member trio-3: annotations %v, %v; want %s=true", vm.Annotations, err, kube.AnnotationLicenses)
	}
	if err := e.vms.ResizePool(e.ctx, e.ns, "trio", 4, func(string) bool { return false }); err != nil {
		t.Errorf("growing the acknowledged pool: %v", err)
	}
	e.refused(t, "solo-2", vdi.EInvalid, func() error { return e.vms.ResizePool(e.ctx, e.ns, "solo", 2, func(string) bool { return false }) },
		"would run 2 copies", "kubectl annotate vm -n NAMESPACE -l corral.dev/vdi-pool=POOL "+kube.AnnotationLicenses+"=true")
}
