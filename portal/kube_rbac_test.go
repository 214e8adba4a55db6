package portal

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestRequiredPermissions: the embedded deploy/rbac.yaml parses into the
// permissions the backend cannot start without.
func TestRequiredPermissions(t *testing.T) {
	var got []string
	for _, p := range requiredPermissions("corral-vdi", nil) {
		got = append(got, p.String())
	}
	for _, want := range []string{"watch leases.coordination.k8s.io", "update leases.coordination.k8s.io", "list virtualmachines.kubevirt.io",
		"get virtualmachineinstances/vnc.subresources.kubevirt.io", "create pods/exec"} {
		if !slices.Contains(got, want) {
			t.Errorf("permissions from deploy/rbac.yaml %v; want %q", got, want)
		}
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
	err := checkRBAC(ctx, bare, ns, nil)
	if err == nil {
		t.Fatal("an unbound ServiceAccount passed the RBAC check")
	}
	for _, want := range []string{"watch leases.coordination.k8s.io", "get virtualmachineinstances/vnc.subresources.kubevirt.io", "create pods/exec", "deploy/rbac.yaml"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q; want it to name %q", err, want)
		}
	}
	t.Logf("unbound: %v", err)

	if err := checkRBAC(ctx, testcluster.Clientset(t, c.PortalServiceAccount(t)), "corral-vdi", nil); err != nil {
		t.Fatalf("the ServiceAccount deploy/rbac.yaml binds: %v", err)
	}
}
