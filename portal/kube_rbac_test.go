package portal

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestRequiredPermissions_MatchRBACYAML: the permissions the portal checks
// at start are exactly deploy/rbac.yaml's ClusterRole, so neither can
// change without the other.
func TestRequiredPermissions_MatchRBACYAML(t *testing.T) {
	f, err := os.Open(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	var inYAML []string
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			break
		}
		if role.Kind != "ClusterRole" {
			continue
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					name, sub, _ := strings.Cut(res, "/")
					for _, v := range r.Verbs {
						inYAML = append(inYAML, permission{g, name, sub, v}.String())
					}
				}
			}
		}
	}
	var checked []string
	for _, p := range requiredPermissions() {
		checked = append(checked, p.String())
	}
	slices.Sort(inYAML)
	slices.Sort(checked)
	if len(inYAML) == 0 || !slices.Equal(inYAML, checked) {
		t.Fatalf("deploy/rbac.yaml grants\n  %v\nbut the portal checks\n  %v", inYAML, checked)
	}
}

// TestCheckRBAC: on a real apiserver, a ServiceAccount without the binding
// is told which verbs on which resources it lacks; the one deploy/rbac.yaml
// binds passes.
func TestCheckRBAC(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	c.Apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	ns := c.Namespace(t)

	bare := testcluster.Clientset(t, c.ServiceAccount(t, ns, "unbound"))
	err := checkRBAC(ctx, bare, ns)
	if err == nil {
		t.Fatal("an unbound ServiceAccount passed the RBAC check")
	}
	for _, want := range []string{"watch leases.coordination.k8s.io", "get virtualmachineinstances/vnc.subresources.kubevirt.io", "create pods/exec", "deploy/rbac.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to name %q", err, want)
		}
	}
	t.Logf("unbound: %v", err)

	if err := checkRBAC(ctx, testcluster.Clientset(t, c.PortalServiceAccount(t)), "corral-vdi"); err != nil {
		t.Fatalf("the ServiceAccount deploy/rbac.yaml binds: %v", err)
	}
}
