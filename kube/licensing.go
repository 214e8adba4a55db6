package kube

import (
	"strings"

	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// AnnotationLicenses on pool members records that the admin who made the
// pool acknowledged holding the Windows licences pooled desktops need
// (vdi.Pool.LicensesAcknowledged); growing a Windows pool past one member
// needs it.
const AnnotationLicenses = "corral.dev/vdi-licenses-acknowledged"

// Hints of the licensing refusal: how to acknowledge at create, and on a
// pool made without the acknowledgement.
const (
	licensesHintCreate = `If you have them, acknowledge it: "licensesAcknowledged": true in POST /api/vdi/pools, ` +
		"or the licences box of the admin page's New pool form. A pool of one member needs no acknowledgement."
	licensesHintResize = "The pool was made without acknowledging the licences. If you have them, mark its members: " +
		"kubectl annotate vm -n NAMESPACE -l " + vdi.LabelPool + "=POOL " + AnnotationLicenses + "=true, then resize again."
)

// windowsEvidence returns what marks vm as a Windows VM by KubeVirt's
// conventions, or "" when nothing does: an OS annotation or label
// (vm.kubevirt.io/os=win*, os.template.kubevirt.io/win*), a windows.*
// preference, or Hyper-V enlightenments, which only Windows guests use.
func windowsEvidence(vm *kubevirtv1.VirtualMachine) string {
	metas := []map[string]string{vm.Labels, vm.Annotations}
	if t := vm.Spec.Template; t != nil {
		metas = append(metas, t.ObjectMeta.Labels, t.ObjectMeta.Annotations)
	}
	for _, m := range metas {
		if name := m["vm.kubevirt.io/os"]; strings.HasPrefix(strings.ToLower(name), "win") {
			return "vm.kubevirt.io/os=" + name
		}
		for k := range m {
			if strings.HasPrefix(k, "os.template.kubevirt.io/win") {
				return "label " + k
			}
		}
	}
	if p := vm.Spec.Preference; p != nil && strings.HasPrefix(strings.ToLower(p.Name), "windows.") {
		return "preference " + p.Name
	}
	if t := vm.Spec.Template; t != nil && t.Spec.Domain.Features != nil {
		if f := t.Spec.Domain.Features; f.Hyperv != nil || f.HypervPassthrough != nil {
			return "Hyper-V enlightenments in domain.features"
		}
	}
	return ""
}

// checkLicenses refuses a pool of more than one member cloned from a
// Windows golden VM unless the admin acknowledged the licences; hint says
// how to.
func checkLicenses(pool vdi.Ref, golden *kubevirtv1.VirtualMachine, size int, acknowledged bool, hint string) error {
	if size <= 1 || acknowledged {
		return nil
	}
	why := windowsEvidence(golden)
	if why == "" {
		return nil
	}
	return vdi.Errorf(vdi.EInvalid, hint,
		"Golden VM %s is a Windows VM (%s), and pool %s would run %d copies of it. Pooled Windows desktops need a licence "+
			"for every user or device: Windows Enterprise E3/E5 or VDA per user or device, or Windows Server with RDS CALs.",
		golden.Name, why, pool, size)
}
