package deploytest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/portal"
)

// serverSideApply applies objs as `kubectl apply --server-side
// --validate=strict` would: unknown or misspelt fields fail.
func serverSideApply(cfg *rest.Config, objs []*unstructured.Unstructured) error {
	ctx := context.Background()
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	force := true
	for _, u := range objs {
		gvk := u.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: %w", gvk, u.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dc.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		body, err := json.Marshal(u)
		if err != nil {
			return err
		}
		if _, err := ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body,
			metav1.PatchOptions{FieldManager: "corral-vdi-deploy-test", Force: &force, FieldValidation: "Strict"}); err != nil {
			return fmt.Errorf("server-side apply %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
		}
	}
	return nil
}

// TestDeploy renders deploy/ and each overlay with kustomize and applies
// them to a real kube-apiserver with server-side apply and strict field
// validation, then reads back what the Deployment promises an operator.
func TestDeploy(t *testing.T) {
	c := testcluster.MustStart(t)
	root := filepath.Join("..", "..", "deploy")
	known := portal.ConfigEnvNames()
	for _, tt := range []struct{ name, dir string }{{"Base", "."}, {"OIDC", "../overlays/oidc"}, {"Tailscale", "../overlays/tailscale"}, {"PostgreSQL", "../overlays/postgres"}} {
		dir := tt.dir
		t.Run(tt.name, func(t *testing.T) {
			objs, err := deploytest.Render(filepath.Join(root, dir))
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, u := range objs {
				kinds = append(kinds, u.GetKind())
			}
			kindsWanted := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy"}
			if tt.name == "Tailscale" {
				kindsWanted = slices.DeleteFunc(kindsWanted, func(k string) bool { return k == "PodDisruptionBudget" })
			}
			for _, want := range kindsWanted {
				if !slices.Contains(kinds, want) {
					t.Errorf("deploy/%s renders %v; want a %s", dir, kinds, want)
				}
			}
			if err := serverSideApply(c.Config, objs); err != nil {
				t.Fatal(err)
			}

			var d *appsv1.Deployment
			d, err = c.Client.AppsV1().Deployments("corral-vdi").Get(context.Background(), "corral-vdi-portal", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkDeployment(t, d, dir, known)
		})
	}

	// A misspelt field, as a hand edit would make it, fails the apply.
	t.Run("MisspeltFieldFails", func(t *testing.T) {
		objs, err := deploytest.Render(root)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range objs {
			if u.GetKind() == "Deployment" {
				unstructured.SetNestedField(u.Object, int64(2), "spec", "replica")
			}
		}
		err = serverSideApply(c.Config, objs)
		if err == nil || !strings.Contains(err.Error(), "replica") {
			t.Fatalf("applying a Deployment with spec.replica: %v; want a strict-validation error naming it", err)
		}
	})
}

// checkDeployment checks the applied Deployment against the list.
func checkDeployment(t *testing.T, d *appsv1.Deployment, dir string, known map[string]bool) {
	t.Helper()
	spec := d.Spec.Template.Spec
	want := int32(2)
	if dir == "../overlays/tailscale" {
		want = 1 // one tailnet node, one name
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != want {
		t.Errorf("replicas %v; want %d", d.Spec.Replicas, want)
	}
	if spec.ServiceAccountName != "corral-vdi-portal" {
		t.Errorf("serviceAccountName %q; want the one deploy/rbac.yaml binds", spec.ServiceAccountName)
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v; want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	if a := spec.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 ||
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("affinity %+v; want anti-affinity across nodes", spec.Affinity)
	}
	var data bool
	for _, v := range spec.Volumes {
		data = data || v.Name == "data" && v.EmptyDir != nil
	}
	if !data {
		t.Error("no emptyDir volume data for the data dir")
	}
	for _, ctr := range spec.Containers {
		sc := ctr.SecurityContext
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s securityContext %+v; want no privilege escalation, a read-only root and ALL capabilities dropped", ctr.Name, sc)
		}
		if ctr.Resources.Limits.Memory().IsZero() || ctr.Resources.Requests.Cpu().IsZero() {
			t.Errorf("container %s resources %+v; want requests and limits", ctr.Name, ctr.Resources)
		}
		if ctr.Name != "portal" {
			continue
		}
		if p := ctr.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
			t.Errorf("readiness probe %+v; want GET /readyz", p)
		}
		if p := ctr.LivenessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/healthz" {
			t.Errorf("liveness probe %+v; want GET /healthz", p)
		}
		secrets := map[string]string{}
		for _, e := range ctr.Env {
			if strings.HasPrefix(e.Name, "CORRAL_VDI_") && !known[e.Name] {
				t.Errorf("env %s is no setting of the portal", e.Name)
			}
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				secrets[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
			if e.Value != "" && (strings.Contains(e.Name, "SECRET") || strings.Contains(e.Name, "KEYS")) && e.Name != "CORRAL_VDI_SHARED_SECRETS_FROM" {
				t.Errorf("env %s has a literal value; secrets come by secretKeyRef", e.Name)
			}
		}
		want := map[string]string{
			"CORRAL_VDI_SESSION_KEYS": "corral-vdi-secrets/session-keys",
			"CORRAL_VDI_TOKEN_KEYS":   "corral-vdi-secrets/token-keys",
			"CORRAL_VDI_PEER_SECRET":  "corral-vdi-secrets/peer-secret",
		}
		if dir == "../overlays/oidc" {
			want["CORRAL_VDI_OIDC_CLIENT_SECRET"] = "corral-vdi-secrets/oidc-client-secret"
		}
		for env, ref := range want {
			if secrets[env] != ref {
				t.Errorf("env %s from %q; want secretKeyRef %s", env, secrets[env], ref)
			}
		}
	}
}
