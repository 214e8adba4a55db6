package portal

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral-vdi-portal/deploy"
)

// permission is one verb on one resource the kube backend uses, in
// Namespace (empty: cluster-wide).
type permission struct {
	Group, Resource, Subresource, Verb string
	Namespace                          string
}

func (p permission) String() string {
	r := p.Resource
	if p.Subresource != "" {
		r += "/" + p.Subresource
	}
	if p.Group != "" {
		r += "." + p.Group
	}
	return p.Verb + " " + r
}

// rulesOf returns the permissions the manifest's objects of kind grant.
func rulesOf(manifest []byte, kind string) []permission {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []permission
	for {
		var role rbacv1.ClusterRole // a Role has the same shape
		if err := dec.Decode(&role); err != nil {
			return out // io.EOF; the manifests are tested to parse
		}
		if role.Kind != kind {
			continue
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					name, sub, _ := strings.Cut(res, "/")
					for _, v := range r.Verbs {
						out = append(out, permission{Group: g, Resource: name, Subresource: sub, Verb: v})
					}
				}
			}
		}
	}
}

// requiredPermissions are the permissions the kube backend uses, read
// from the manifests embedded in the binary, so that the check and the
// manifests cannot drift. With no pool namespaces (the cluster-wide mode)
// they are deploy/rbac.yaml's ClusterRole, cluster-wide; else the pool
// Role's in each pool namespace, the cluster-scoped reads cluster-wide and
// the leader and claim-lock Leases in the portal's own namespace.
func requiredPermissions(portalNamespace string, poolNamespaces []string) []permission {
	if len(poolNamespaces) == 0 {
		return rulesOf(deploy.RBAC, "ClusterRole")
	}
	out := rulesOf(deploy.ClusterRBAC, "ClusterRole")
	for _, p := range rulesOf(deploy.ClusterRBAC, "Role") {
		p.Namespace = portalNamespace
		out = append(out, p)
	}
	pool := rulesOf(deploy.PoolRBAC, "Role")
	for _, ns := range poolNamespaces {
		for _, p := range pool {
			p.Namespace = ns
			out = append(out, p)
		}
	}
	return out
}

// missingPermissions asks the API server, with one SelfSubjectAccessReview
// per permission (in its namespace), which of perms the portal's identity
// lacks. Every authenticated identity may ask this about itself.
func missingPermissions(ctx context.Context, cs kubernetes.Interface, perms []permission) ([]permission, error) {
	allowed := make([]bool, len(perms))
	errs := make([]error, len(perms))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, p := range perms {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: p.Namespace, Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Verb: p.Verb},
			}}
			res, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, review, metav1.CreateOptions{})
			if err != nil {
				errs[i] = err
				return
			}
			allowed[i] = res.Status.Allowed
		}()
	}
	wg.Wait()
	var missing []permission
	for i, p := range perms {
		if errs[i] != nil {
			return nil, fmt.Errorf("kube backend: ask the API server what the portal may do: %w", errs[i])
		}
		if !allowed[i] {
			missing = append(missing, p)
		}
	}
	return missing, nil
}

// describeMissing names the missing permissions, grouped by where: "list
// leases.coordination.k8s.io, create pods/exec in namespace team-b".
func describeMissing(missing []permission) string {
	var where []string
	by := map[string][]string{}
	for _, p := range missing {
		w := "cluster-wide"
		if p.Namespace != "" {
			w = "in namespace " + p.Namespace
		}
		if _, ok := by[w]; !ok {
			where = append(where, w)
		}
		by[w] = append(by[w], p.String())
	}
	parts := make([]string, len(where))
	for i, w := range where {
		parts[i] = strings.Join(by[w], ", ") + " (" + w + ")"
	}
	return strings.Join(parts, "; ")
}

// rbacFix says how to grant what is missing, in the mode the portal runs.
func rbacFix(portalNamespace string, poolNamespaces []string, missing []permission) string {
	if len(poolNamespaces) == 0 {
		return fmt.Sprintf("apply deploy/rbac.yaml (kubectl apply -k deploy/overlays/cluster-wide) and run the portal as ServiceAccount %s/corral-vdi-portal, or bind it to the ClusterRole corral-vdi-portal", portalNamespace)
	}
	var nss []string
	cluster := false // or the portal's own namespace: both are rbac-cluster.yaml's
	for _, p := range missing {
		switch {
		case p.Namespace == "" || p.Namespace == portalNamespace && !contains(poolNamespaces, p.Namespace):
			cluster = true
		case !contains(nss, p.Namespace):
			nss = append(nss, p.Namespace)
		}
	}
	var fix []string
	for _, ns := range nss {
		fix = append(fix, fmt.Sprintf("apply deploy/pool-namespace in %s (a kustomization with namespace: %s and resources: [deploy/pool-namespace]), or drop it from CORRAL_VDI_POOL_NAMESPACES", ns, ns))
	}
	if cluster {
		fix = append(fix, "apply deploy/base/rbac-cluster.yaml (kubectl apply -k deploy/)")
	}
	return strings.Join(fix, "; ")
}

// checkRBAC returns an error naming every verb on every resource (and
// where) the portal may not use, so a Deployment without its Role or
// binding says so at start in one line instead of failing request by
// request.
func checkRBAC(ctx context.Context, cs kubernetes.Interface, namespace string, poolNamespaces []string) error {
	missing, err := missingPermissions(ctx, cs, requiredPermissions(namespace, poolNamespaces))
	if err != nil || len(missing) == 0 {
		return err
	}
	return fmt.Errorf("kube backend: the portal's identity may not %s: %s", describeMissing(missing), rbacFix(namespace, poolNamespaces, missing))
}
