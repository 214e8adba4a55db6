package deploytest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Apply applies objs as `kubectl apply --server-side --validate=strict`
// would (with dryRun, as `--dry-run=server` would: the API server
// validates and admits every object and stores none) and returns the
// objects as the API server answered.
func Apply(cfg *rest.Config, objs []*unstructured.Unstructured, dryRun bool) ([]*unstructured.Unstructured, error) {
	ctx := context.Background()
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	force := true
	opts := metav1.PatchOptions{FieldManager: "corral-vdi-deploy-test", Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	var out []*unstructured.Unstructured
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", gvk, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dc.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := json.Marshal(u)
		if err != nil {
			return nil, err
		}
		got, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, opts)
		if err != nil {
			return nil, fmt.Errorf("server-side apply %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
		out = append(out, got)
	}
	return out, nil
}

// RenderPoolNamespace renders the pool-namespace kit under deploy (the
// portal's Role and the console NetworkPolicies) into namespace ns, as an
// operator's three-line kustomization would.
func RenderPoolNamespace(deploy, ns string) ([]*unstructured.Unstructured, error) {
	abs, err := filepath.Abs(filepath.Join(deploy, "pool-namespace"))
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), ".deploytest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	k := fmt.Sprintf("namespace: %s\nresources: [../pool-namespace]\n", ns)
	if err := os.WriteFile(filepath.Join(tmp, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	return Render(tmp)
}
