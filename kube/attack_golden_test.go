package kube_test

import (
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testKubeVirtAttackGoldenKeys is the attacker's row of cloning on
// KubeVirt: someone who may edit a golden VM (not the portal) writes the
// portal's own keys on it, hoping the clones copy them onto every member:
// access for everyone, a licence acknowledgement the admin never gave,
// open consoles, an assignee; and a value shaped to smuggle a patch of its
// own into the clone. Members get the pool's keys alone.
func testKubeVirtAttackGoldenKeys(t *testing.T, s *kubeVirtSetup) {
	planted := map[string]string{
		kube.AnnotationAccess:    `{"access":{}}`,
		kube.AnnotationLicenses:  "true",
		vdi.AnnotationConsoles:   "5",
		vdi.LabelAssignedTo:      "mallory",
		kube.AnnotationStandby:   `2","path":"/spec/runStrategy","value":"Always`,
		"corral.dev/vdi-invalid": "x",
	}
	g := s.golden(t, "planted", func(vm *kubevirtv1.VirtualMachine) {
		vm.Annotations = planted
		vm.Labels[vdi.LabelAssignedTo] = "mallory"
	}, "planted-root")
	root := s.disk(t, "planted-root", testcluster.StorageClassDefault, nil)
	pool := vdi.Pool{Namespace: s.ns, Name: "planted", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "planted", Size: 1,
		Access: vdi.Access{Users: []string{"alice"}}}
	if err := s.vms.CreatePool(s.ctx, pool); err != nil {
		t.Fatalf("create a pool from a golden VM with planted keys: %v", err)
	}
	check := func(when string) {
		t.Helper()
		var m kubevirtv1.VirtualMachine
		if err := s.admin.Get(s.ctx, client.ObjectKey{Namespace: s.ns, Name: "planted-1"}, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{kube.AnnotationLicenses, vdi.AnnotationConsoles, vdi.LabelAssignedTo, "corral.dev/vdi-invalid"} {
			if v, ok := m.Annotations[k]; ok {
				t.Errorf("%s: member annotation %s=%q copied from the golden VM", when, k, v)
			}
		}
		if v, ok := m.Labels[vdi.LabelAssignedTo]; ok {
			t.Errorf("%s: member label %s=%q copied from the golden VM", when, vdi.LabelAssignedTo, v)
		}
		if got := m.Annotations[kube.AnnotationAccess]; got == planted[kube.AnnotationAccess] {
			t.Errorf("%s: member access %s; want the pool's (alice only)", when, got)
		}
		if got := m.Annotations[kube.AnnotationStandby]; got != "0" {
			t.Errorf("%s: member standby %q; want the pool's 0", when, got)
		}
		if rs := m.Spec.RunStrategy; rs == nil || *rs != kubevirtv1.RunStrategyHalted {
			t.Errorf("%s: member runStrategy %v; want Halted (no smuggled patch)", when, rs)
		}
	}
	check("after create")
	if err := s.vms.Recreate(s.ctx, vdi.Ref{Namespace: s.ns, Name: "planted-1"}); err != nil {
		t.Fatalf("recreate: %v", err)
	}
	check("after recreate")
	s.goldenDisksIntact(t, g, root)
}
