package deploytest_test

import (
	"slices"
	"strconv"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
)

// checkCiliumPolicy reads a CiliumNetworkPolicy as Cilium would for the
// portal's pods: it selects the pods of the Deployment in objs and admits
// their egress to the kube-apiserver entity on every port the base
// NetworkPolicy's API server rule opens (443 and 6443), and nothing else.
func checkCiliumPolicy(t *testing.T, cnp *unstructured.Unstructured, objs []*unstructured.Unstructured) {
	t.Helper()
	d, err := deploytest.Deployment(objs)
	if err != nil {
		t.Fatal(err)
	}
	sel, _, _ := unstructured.NestedStringMap(cnp.Object, "spec", "endpointSelector", "matchLabels")
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("CiliumNetworkPolicy %s selects %v; want the portal's pods %v", cnp.GetName(), sel, d.Spec.Template.Labels)
	}
	egress, _, _ := unstructured.NestedSlice(cnp.Object, "spec", "egress")
	var ports []int
	for _, e := range egress {
		rule := e.(map[string]any)
		entities, _, _ := unstructured.NestedStringSlice(rule, "toEntities")
		if !slices.Equal(entities, []string{"kube-apiserver"}) || len(rule) != 2 {
			t.Errorf("CiliumNetworkPolicy %s admits %v; want only the kube-apiserver entity on its ports", cnp.GetName(), rule)
		}
		toPorts, _, _ := unstructured.NestedSlice(rule, "toPorts")
		for _, tp := range toPorts {
			list, _, _ := unstructured.NestedSlice(tp.(map[string]any), "ports")
			for _, p := range list {
				n, _ := strconv.Atoi(p.(map[string]any)["port"].(string))
				ports = append(ports, n)
			}
		}
	}
	slices.Sort(ports)
	if !slices.Equal(ports, []int{443, 6443}) {
		t.Errorf("CiliumNetworkPolicy %s opens ports %v to the API server; want 443 and 6443", cnp.GetName(), ports)
	}
}

// checkOpenShiftPod: the pod leaves its uid, gid and fsGroup to
// OpenShift's restricted-v2 SCC (a fixed one outside the project's range
// is refused there) and still asks to run as non-root.
func checkOpenShiftPod(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	sc := d.Spec.Template.Spec.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		t.Errorf("the pod's securityContext %+v; want runAsNonRoot", sc)
		return
	}
	if sc.RunAsUser != nil || sc.RunAsGroup != nil || sc.FSGroup != nil {
		t.Errorf("the pod fixes uid %v, gid %v, fsGroup %v; want them left to the SCC", sc.RunAsUser, sc.RunAsGroup, sc.FSGroup)
	}
}
