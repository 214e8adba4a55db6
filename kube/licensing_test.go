package kube

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestWindowsEvidence(t *testing.T) {
	template := func(f func(*kubevirtv1.VirtualMachineInstanceTemplateSpec)) *kubevirtv1.VirtualMachine {
		vm := &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{}}}
		f(vm.Spec.Template)
		return vm
	}
	for _, tc := range []struct {
		name    string
		vm      *kubevirtv1.VirtualMachine
		windows bool
	}{
		{"os annotation", &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"vm.kubevirt.io/os": "windows2k22"}}}, true},
		{"linux os annotation", &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"vm.kubevirt.io/os": "fedora"}}}, false},
		{"os template label", &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"os.template.kubevirt.io/win11": "true"}}}, true},
		{"template's os label", template(func(t *kubevirtv1.VirtualMachineInstanceTemplateSpec) {
			t.ObjectMeta.Labels = map[string]string{"os.template.kubevirt.io/win2k19": "true"}
		}), true},
		{"preference", &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Preference: &kubevirtv1.PreferenceMatcher{Name: "windows.11.virtio"}}}, true},
		{"linux preference", &kubevirtv1.VirtualMachine{Spec: kubevirtv1.VirtualMachineSpec{Preference: &kubevirtv1.PreferenceMatcher{Name: "fedora"}}}, false},
		{"hyper-v features", template(func(t *kubevirtv1.VirtualMachineInstanceTemplateSpec) {
			t.Spec.Domain.Features = &kubevirtv1.Features{Hyperv: &kubevirtv1.FeatureHyperv{}}
		}), true},
		{"plain", template(func(*kubevirtv1.VirtualMachineInstanceTemplateSpec) {}), false},
	} {
		if got := windowsEvidence(tc.vm); (got != "") != tc.windows {
			t.Errorf("%s: windowsEvidence = %q; want Windows %v", tc.name, got, tc.windows)
		}
	}
}
