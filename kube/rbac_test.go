package kube_test

import (
	"context"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestLeasesAsServiceAccount runs the whole claim suite (contract, races
// across portal processes, crash, stale takeover) as the portal's
// ServiceAccount, bound only to the role in deploy/rbac.yaml.
func TestLeasesAsServiceAccount(t *testing.T) {
	c := testcluster.Shared(t)
	c.Apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	sa := c.PortalServiceAccount(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Store { return kubeStore(t, c, sa) })
}

// TestRBACIsEnforced checks that the suite above proves something: a
// ServiceAccount without the binding may not touch Leases, and the portal's
// may not do what its role leaves out.
func TestRBACIsEnforced(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	c.Apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	ns := c.Namespace(t)

	unbound := testcluster.Clientset(t, c.ServiceAccount(t, ns, "nobody"))
	if _, err := unbound.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("an unbound ServiceAccount listing Leases: %v; want Forbidden", err)
	}
	portal := testcluster.Clientset(t, c.PortalServiceAccount(t))
	if _, err := portal.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("the portal listing Leases: %v; want allowed", err)
	}
	if _, err := portal.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the portal listing Secrets: %v; want Forbidden", err)
	}
	if err := portal.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the portal deleting a namespace: %v; want Forbidden", err)
	}
}
