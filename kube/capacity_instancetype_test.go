package kube_test

import (
	"context"
	"encoding/json"
	appsv1 "k8s.io/api/apps/v1"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestCapacityInstancetypeDevices admits a pool whose golden VM takes its
// GPU from a cluster instancetype, not its template: the GPU counts, so a
// pool larger than the nodes' GPUs is refused before any clone, and one
// that fits is made.
func TestCapacityInstancetypeDevices(t *testing.T) {
	e := mustCapacityEnv(t)
	gpu := "corral.test/it-gpu-" + e.ns
	kv := &kubevirtv1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "kubevirt"}}
	kv.Spec.Configuration.PermittedHostDevices = &kubevirtv1.PermittedHostDevices{
		PciHostDevices: []kubevirtv1.PciHostDevice{{PCIVendorSelector: "10DE:2236", ResourceName: gpu}}}
	if err := e.admin.Create(e.ctx, kv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.admin.Delete(context.Background(), kv) })
	e.node(t, "gpu", map[string]int64{gpu: 1})

	// The admin client's scheme has no instancetype kinds: write it as JSON.
	it := &instancetypev1beta1.VirtualMachineClusterInstancetype{
		TypeMeta:   metav1.TypeMeta{APIVersion: instancetypev1beta1.SchemeGroupVersion.String(), Kind: "VirtualMachineClusterInstancetype"},
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-" + e.ns},
		Spec:       instancetypev1beta1.VirtualMachineInstancetypeSpec{GPUs: []kubevirtv1.GPU{{Name: "gpu1", DeviceName: gpu}}},
	}
	body, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(it)
	cs := e.c.Client.Discovery().RESTClient()
	path := "/apis/instancetype.kubevirt.io/v1beta1/virtualmachineclusterinstancetypes"
	if err := cs.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body(mustJSON(t, body)).Do(e.ctx).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Delete().AbsPath(path, it.Name).Do(context.Background()) })

	halted := kubevirtv1.RunStrategyHalted
	golden := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gold-it"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted, Instancetype: &kubevirtv1.InstancetypeMatcher{Name: it.Name},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
	if err := e.admin.Create(e.ctx, golden); err != nil {
		t.Fatal(err)
	}
	create := func(name string, size int) error {
		return e.vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: name, Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "gold-it", Size: size})
	}
	e.refused(t, "two-1", vdi.EConflict, func() error { return create("two", 2) },
		"2 VMs must be able to run at once", "1 × "+gpu, "the nodes have room for 1")
	if err := create("one", 1); err != nil {
		t.Fatalf("a pool of 1 with the instancetype's GPU: %v", err)
	}
	if got := e.members(t, "one"); got != 1 {
		t.Errorf("%d members; want 1", got)
	}
	// KubeVirt applies the instancetype it stored in a ControllerRevision,
	// not the live one: a golden VM whose live instancetype lost its GPU
	// still gives members the stored GPU.
	bare := &instancetypev1beta1.VirtualMachineClusterInstancetype{
		TypeMeta:   it.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: "bare-" + e.ns},
	}
	bareBody, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(bare)
	if err := cs.Post().AbsPath(path).SetHeader("Content-Type", "application/json").Body(mustJSON(t, bareBody)).Do(e.ctx).Error(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Delete().AbsPath(path, bare.Name).Do(context.Background()) })
	stored := it.DeepCopy()
	stored.Name = bare.Name
	rev := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "gold-rev-" + bare.Name},
		Data: runtime.RawExtension{Raw: mustJSON(t, stored)}}
	if err := e.admin.Create(e.ctx, rev); err != nil {
		t.Fatal(err)
	}
	revGolden := golden.DeepCopy()
	revGolden.ObjectMeta = metav1.ObjectMeta{Namespace: e.ns, Name: "gold-rev"}
	revGolden.Spec.Instancetype = &kubevirtv1.InstancetypeMatcher{Name: bare.Name, RevisionName: rev.Name}
	if err := e.admin.Create(e.ctx, revGolden); err != nil {
		t.Fatal(err)
	}
	e.refused(t, "rev-1", vdi.EConflict, func() error {
		return e.vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: "rev", Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "gold-rev", Size: 2})
	}, "2 VMs must be able to run at once", "1 × "+gpu)

	// KubeVirt matches the kind lowercased, singular or plural: so does
	// admission.
	plural := golden.DeepCopy()
	plural.ObjectMeta = metav1.ObjectMeta{Namespace: e.ns, Name: "gold-it-plural"}
	plural.Spec.Instancetype.Kind = "virtualmachineclusterinstancetypes"
	if err := e.admin.Create(e.ctx, plural); err != nil {
		t.Fatal(err)
	}
	e.refused(t, "plural-1", vdi.EConflict, func() error {
		return e.vms.CreatePool(e.ctx, vdi.Pool{Namespace: e.ns, Name: "plural", Kind: vdi.KindVM, Mode: vdi.ModePersistent, Source: "gold-it-plural", Size: 2})
	}, "2 VMs must be able to run at once", "1 × "+gpu)
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
