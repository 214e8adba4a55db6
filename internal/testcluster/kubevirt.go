package testcluster

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"kubevirt.io/api/clone"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"kubevirt.io/api/instancetype"
	"kubevirt.io/api/snapshot"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// KubeVirtCRDs returns the CustomResourceDefinitions of the KubeVirt kinds
// the portal uses: VirtualMachine, VirtualMachineInstance and KubeVirt (the
// configuration, whose permittedHostDevices classify GPUs) in
// kubevirt.io/v1, VirtualMachineClone (clone.kubevirt.io/v1beta1) and
// VirtualMachineSnapshot (snapshot.kubevirt.io/v1beta1), and the
// instancetypes (instancetype.kubevirt.io/v1beta1) whose devices capacity
// admission counts.
//
// Simplified: names, scopes, versions and the status subresource are
// KubeVirt's, but the schemas keep every field unchecked
// (x-kubernetes-preserve-unknown-fields), because kubevirt.io/api ships Go
// types, not the generated OpenAPI schemas (those live in KubeVirt's
// operator). The apiserver therefore accepts objects real KubeVirt would
// refuse; the portal's own code builds them from the typed structs.
func KubeVirtCRDs() []*apiextensionsv1.CustomResourceDefinition {
	return []*apiextensionsv1.CustomResourceDefinition{
		crd(kubevirtv1.GroupVersion.Group, "v1", "VirtualMachine", "virtualmachines", "vm", "vms"),
		crd(kubevirtv1.GroupVersion.Group, "v1", "VirtualMachineInstance", "virtualmachineinstances", "vmi", "vmis"),
		crd(kubevirtv1.GroupVersion.Group, "v1", "KubeVirt", "kubevirts", "kv", "kvs"),
		crd(clone.GroupName, clone.LatestVersion, clone.Kind, clone.ResourceVMClonePlural, "vmclone", "vmclones"),
		crd(snapshot.GroupName, "v1beta1", "VirtualMachineSnapshot", "virtualmachinesnapshots", "vmsnapshot", "vmsnapshots"),
		crd(instancetype.GroupName, "v1beta1", "VirtualMachineInstancetype", "virtualmachineinstancetypes", "vminstancetype"),
		clusterScoped(crd(instancetype.GroupName, "v1beta1", "VirtualMachineClusterInstancetype", "virtualmachineclusterinstancetypes", "vmclusterinstancetype")),
	}
}

// InstallKubeVirt installs KubeVirtCRDs and waits until they are served.
// There is no KubeVirt controller: tests or a stand-in write status.
func (c *Cluster) InstallKubeVirt(tb testing.TB) {
	tb.Helper()
	if _, err := envtest.InstallCRDs(c.Config, envtest.CRDInstallOptions{CRDs: KubeVirtCRDs()}); err != nil {
		tb.Fatalf("testcluster: install KubeVirt CRDs: %v", err)
	}
}

func crd(group, version, kind, plural string, short ...string) *apiextensionsv1.CustomResourceDefinition {
	yes := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind), ShortNames: short,
				Categories: []string{"all"},
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type:                   "object",
					XPreserveUnknownFields: &yes,
				}},
			}},
		},
	}
}

// clusterScoped makes c cluster-scoped.
func clusterScoped(c *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.CustomResourceDefinition {
	c.Spec.Scope = apiextensionsv1.ClusterScoped
	return c
}
