package deploytest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// rules returns the grants of the objects of kind named name in the
// manifest file, one "verb group/resource" each, sorted.
func rules(t *testing.T, file, kind, name string) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []string
	found := false
	for {
		var r rbacv1.ClusterRole
		if dec.Decode(&r) != nil {
			break
		}
		if r.Kind != kind || r.Name != name {
			continue
		}
		found = true
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, v+" "+g+"/"+res)
					}
				}
			}
		}
	}
	if !found {
		t.Fatalf("deploy/%s has no %s %s", file, kind, name)
	}
	slices.Sort(out)
	return out
}

// TestRBACModes: the cluster-wide mode's ClusterRole (deploy/rbac.yaml,
// and its copy in overlays/cluster-wide) grants exactly the pool Role's
// verbs plus the namespaced mode's cluster-scoped reads, so the modes
// cannot drift; and no pool verb is granted cluster-wide in the
// namespaced mode.
func TestRBACModes(t *testing.T) {
	pool := rules(t, "pool-namespace/rbac.yaml", "Role", "corral-vdi-portal")
	cluster := rules(t, "base/rbac-cluster.yaml", "ClusterRole", "corral-vdi-portal-cluster")
	want := append(slices.Clone(pool), cluster...)
	slices.Sort(want)
	for _, file := range []string{"rbac.yaml", "overlays/cluster-wide/clusterrole.yaml"} {
		if got := rules(t, file, "ClusterRole", "corral-vdi-portal"); !slices.Equal(got, want) {
			t.Errorf("deploy/%s grants\n%s\nwant the pool Role's and the cluster-scoped reads:\n%s", file, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	for _, g := range cluster {
		if slices.Contains(pool, g) {
			t.Errorf("%s is in both the pool Role and the cluster-wide reads", g)
		}
	}
	// The caches watch VMs, Pods and ConfigMaps (kube/caches.go), so those
	// watches are used now.
	for _, unused := range []string{"create kubevirt.io/virtualmachines", "update kubevirt.io/virtualmachines",
		"update subresources.kubevirt.io/virtualmachines/restart", "create /events"} {
		if slices.Contains(want, unused) {
			t.Errorf("the portal is granted %q, which the kube backend never uses", unused)
		}
	}
}
