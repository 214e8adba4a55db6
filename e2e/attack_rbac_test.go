package e2e

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestAttack_PortalServiceAccount: an attacker who gets the portal's
// token (a bug in the portal, a stolen pod) holds only what the
// namespaced RBAC of deploy/ grants. Each row is a SubjectAccessReview
// against the real apiserver, as `kubectl auth can-i VERB RESOURCE -n NS
// --as=system:serviceaccount:corral-vdi:corral-vdi-portal` asks it; the
// allowed rows show the review can say yes, so the refusals mean
// something.
func TestAttack_PortalServiceAccount(t *testing.T) {
	c := testcluster.MustStart(t)
	pool := c.Namespace(t)
	applyNamespacedRBAC(t, c, pool)
	const sa = "system:serviceaccount:corral-vdi:corral-vdi-portal"
	for _, tt := range []struct {
		name                                  string
		namespace, group, resource, sub, verb string
		allowed                               bool
	}{
		// kubectl auth can-i create pods/exec -n kube-system: no.
		{"ExecInKubeSystem", "kube-system", "", "pods", "exec", "create", false},
		{"ExecInKubeSystemByGet", "kube-system", "", "pods", "exec", "get", false},
		{"PodInKubeSystem", "kube-system", "", "pods", "", "create", false},
		{"PodInDefault", "default", "", "pods", "", "create", false},
		{"PodInItsOwnNamespace", "corral-vdi", "", "pods", "", "create", false},
		{"PodsCluster-wide", "", "", "pods", "", "create", false},
		{"ExecCluster-wide", "", "", "pods", "exec", "create", false},
		{"SecretsInPoolNamespace", pool, "", "secrets", "", "get", false},
		{"PVCPatchElsewhere", "kube-system", "", "persistentvolumeclaims", "", "patch", false},
		{"LeaseInKubeSystem", "kube-system", "coordination.k8s.io", "leases", "", "update", false},
		{"VMCreate", pool, "kubevirt.io", "virtualmachines", "", "create", false},
		{"VMRestart", pool, "subresources.kubevirt.io", "virtualmachines", "restart", "update", false},
		{"BindAnything", pool, "rbac.authorization.k8s.io", "rolebindings", "", "create", false},
		// The backend's caches watch what it lists, where it lists it:
		// no watch of Secrets, nor of Pods or ConfigMaps elsewhere.
		{"WatchSecretsInPoolNamespace", pool, "", "secrets", "", "watch", false},
		{"WatchPodsInKubeSystem", "kube-system", "", "pods", "", "watch", false},
		{"WatchConfigMapsInDefault", "default", "", "configmaps", "", "watch", false},
		{"WatchPodsCluster-wide", "", "", "pods", "", "watch", false},
		// What the portal does, where it does it.
		{"WatchVMsInPoolNamespace", pool, "kubevirt.io", "virtualmachines", "", "watch", true},
		{"WatchPodsInPoolNamespace", pool, "", "pods", "", "watch", true},
		{"ExecInPoolNamespace", pool, "", "pods", "exec", "create", true},
		{"PodInPoolNamespace", pool, "", "pods", "", "create", true},
		{"NodesCluster-wide", "", "", "nodes", "", "list", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: sa,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:corral-vdi", "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: tt.namespace, Group: tt.group, Resource: tt.resource,
					Subresource: tt.sub, Verb: tt.verb}}}
			got, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), review, metav1.CreateOptions{})
			must(t, err)
			if got.Status.Allowed != tt.allowed {
				t.Fatalf("can-i %s %s/%s -n %q as the portal: %v (%s); want %v", tt.verb, tt.resource, tt.sub, tt.namespace, got.Status.Allowed, got.Status.Reason, tt.allowed)
			}
		})
	}
}
