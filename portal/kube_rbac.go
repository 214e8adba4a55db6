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

// permission is one verb on one resource the kube backend uses.
type permission struct {
	Group, Resource, Subresource, Verb string
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

// requiredPermissions are the cluster-wide permissions the kube backend
// uses: those deploy/rbac.yaml's ClusterRole grants, read from the copy
// embedded in the binary, so the check and the manifest cannot drift.
func requiredPermissions() []permission {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(deploy.RBAC), 4096)
	var out []permission
	for {
		var role rbacv1.ClusterRole
		if err := dec.Decode(&role); err != nil {
			return out // io.EOF; the manifest is tested to parse
		}
		if role.Kind != "ClusterRole" {
			continue
		}
		for _, r := range role.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					name, sub, _ := strings.Cut(res, "/")
					for _, v := range r.Verbs {
						out = append(out, permission{g, name, sub, v})
					}
				}
			}
		}
	}
}

// missingPermissions asks the API server, with one SelfSubjectAccessReview
// per permission, which of requiredPermissions the portal's identity lacks
// cluster-wide. Every authenticated identity may ask this about itself.
func missingPermissions(ctx context.Context, cs kubernetes.Interface) ([]permission, error) {
	perms := requiredPermissions()
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
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: p.Group, Resource: p.Resource, Subresource: p.Subresource, Verb: p.Verb},
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

// checkRBAC returns an error naming every verb on every resource the
// portal may not use, so a Deployment without deploy/rbac.yaml's binding
// says so at start instead of failing request by request.
func checkRBAC(ctx context.Context, cs kubernetes.Interface, namespace string) error {
	missing, err := missingPermissions(ctx, cs)
	if err != nil || len(missing) == 0 {
		return err
	}
	names := make([]string, len(missing))
	for i, p := range missing {
		names[i] = p.String()
	}
	return fmt.Errorf("kube backend: the portal's identity may not %s (cluster-wide): apply deploy/rbac.yaml (kubectl apply -k deploy/) and run the portal as ServiceAccount %s/corral-vdi-portal, or bind it to the ClusterRole corral-vdi-portal",
		strings.Join(names, ", "), namespace)
}
