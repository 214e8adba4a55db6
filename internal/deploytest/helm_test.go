package deploytest_test

import (
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
)

// chartDir is the Helm chart, relative to this package.
var chartDir = filepath.Join("..", "..", "deploy", "helm", "corral-vdi-portal")

// chartCases are the overlays of TestDeploy (and the monitoring one) with
// the chart's values for the same install (ci/<name>-values.yaml; none
// for the base).
var chartCases = []struct{ name, dir, values string }{
	{"Base", ".", ""}, {"OIDC", "overlays/oidc", "oidc"}, {"Gateway", "overlays/gateway", "gateway"},
	{"Tailscale", "overlays/tailscale", "tailscale"}, {"PostgreSQL", "overlays/postgres", "postgres"},
	{"ClusterWide", "overlays/cluster-wide", "cluster-wide"}, {"Monitoring", "overlays/monitoring", "monitoring"},
	{"Cilium", "overlays/cilium", "cilium"}, {"OpenShift", "overlays/openshift", "openshift"},
	{"H264", "overlays/h264", "h264"},
}

// mustRenderChart renders the chart for release corral-vdi in namespace
// corral-vdi with the values file ci/<values>-values.yaml (none: the
// defaults).
func mustRenderChart(t *testing.T, values string) *deploytest.Chart {
	t.Helper()
	vals := map[string]any{}
	if values != "" {
		var err error
		if vals, err = deploytest.ReadValues(filepath.Join(chartDir, "ci", values+"-values.yaml")); err != nil {
			t.Fatal(err)
		}
	}
	ch, err := deploytest.RenderChart(chartDir, "corral-vdi", "corral-vdi", vals)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// TestChartMatchesKustomize renders the Helm chart and deploy/ with
// kustomize, for the base (the chart's defaults) and each overlay (its
// ci/ values), and compares them object by object: the chart is not a
// hand-kept twin that drifts. The one object the chart leaves out is the
// release's own Namespace (Helm's, made by --create-namespace or by the
// operator), and the one it adds is the Secret of the portal's keys
// (secrets.create: random keys, which kustomize cannot make; the operator
// makes it for deploy/); Helm's own labels (helm.sh/chart, managed-by), the hash of
// the generated tailscale ConfigMap's name and the order of named list
// items (kustomize puts a patch's new env entries and volumes first) are
// the only differences allowed.
func TestChartMatchesKustomize(t *testing.T) {
	root := filepath.Join("..", "..", "deploy")
	for _, tt := range chartCases {
		t.Run(tt.name, func(t *testing.T) {
			kobjs, err := deploytest.Render(filepath.Join(root, tt.dir))
			if err != nil {
				t.Fatal(err)
			}
			kobjs = slices.DeleteFunc(kobjs, func(u *unstructured.Unstructured) bool {
				return u.GetKind() == "Namespace" && u.GetName() == "corral-vdi"
			})
			want := byID(t, kobjs)
			got := byID(t, slices.DeleteFunc(mustRenderChart(t, tt.values).Objects, func(u *unstructured.Unstructured) bool {
				return u.GetKind() == "Secret" && u.GetName() == "corral-vdi-secrets"
			}))
			for id, w := range want {
				g, ok := got[id]
				if !ok {
					t.Errorf("the chart renders no %s; deploy/%s has it", id, tt.dir)
					continue
				}
				if d := cmp.Diff(w, g); d != "" {
					t.Errorf("%s: deploy/%s (-) and the chart (+) differ:\n%s", id, tt.dir, d)
				}
			}
			for id := range got {
				if _, ok := want[id]; !ok {
					t.Errorf("the chart renders %s; deploy/%s has none", id, tt.dir)
				}
			}
		})
	}
}

// generatedName is a kustomize configMapGenerator's name with its hash, or
// the chart's with its own.
var generatedName = regexp.MustCompile(`(corral-vdi-tailscale-serve)-[0-9a-z]{10}\b`)

// byID keys objs by kind/namespace/name, each as plain JSON values with
// the chart's Helm-only labels left out.
func byID(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	out := map[string]any{}
	for _, u := range objs {
		u = u.DeepCopy()
		labels := u.GetLabels()
		delete(labels, "helm.sh/chart")
		delete(labels, "app.kubernetes.io/managed-by")
		u.SetLabels(labels)
		raw, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		raw = generatedName.ReplaceAll(raw, []byte("$1-HASH"))
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			t.Fatal(err)
		}
		sortNamed(v)
		id := strings.Join([]string{u.GetKind(), u.GetNamespace(), generatedName.ReplaceAllString(u.GetName(), "$1-HASH")}, "/")
		if _, dup := out[id]; dup {
			t.Errorf("%s rendered twice", id)
		}
		out[id] = v
	}
	return out
}

// sortNamed sorts, in place and at any depth of v, every list whose items
// all have a name (env, volumes, volumeMounts, containers, ports) by it.
func sortNamed(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, x := range v {
			sortNamed(x)
		}
	case []any:
		named := len(v) > 0
		for _, x := range v {
			sortNamed(x)
			m, ok := x.(map[string]any)
			_, hasName := m["name"].(string)
			named = named && ok && hasName
		}
		if named {
			slices.SortStableFunc(v, func(a, b any) int {
				return strings.Compare(a.(map[string]any)["name"].(string), b.(map[string]any)["name"].(string))
			})
		}
	}
}

// TestChartValuesSchema: a wrong value fails as helm install would fail
// it, with the field named, before anything is rendered.
func TestChartValuesSchema(t *testing.T) {
	for _, tt := range []struct {
		name  string
		vals  string
		field string
	}{
		{"MistypedReplicas", `replicaCount: two`, "/replicaCount"},
		{"MisspeltKey", `replicas: 2`, "replicas"},
		{"MisspeltNestedKey", "ingress:\n  classname: traefik", "classname"},
		{"DigestNotSHA256", "image:\n  digest: latest", "/image/digest"},
		{"UnknownAuthMode", "auth:\n  modes: ldap", "/auth/modes"},
		{"OIDCWithoutIssuer", "auth:\n  modes: oidc", "/oidc/issuer"},
		{"IngressWithoutClass", "ingress:\n  enabled: true\n  host: vdi.example.com", "/ingress/className"},
		{"RouteWithoutGateway", "httpRoute:\n  enabled: true", "/httpRoute/parentRefs"},
		{"TailscaleTwoReplicas", "tailscale:\n  sidecar:\n    enabled: true", "/replicaCount"},
		{"PasswordInDSN", "database:\n  url: postgres://corral:hunter2@db:5432/corral", "/database/url"},
		{"BadPoolNamespace", "poolNamespaces: [{name: Team_B}]", "/poolNamespaces/0/name"},
		{"NoPoolNamespaces", "poolNamespaces: []", "/poolNamespaces"},
		{"BadDrain", "drainTimeout: five minutes", "/drainTimeout"},
		{"H264NotAProgram", "h264: gst-launch-1.0 videotestsrc", "/h264"},
		{"MemoryNotMiOrGi", "resources:\n  limits:\n    memory: 1.5G", "resources.limits.memory"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tt.vals), &vals); err != nil {
				t.Fatal(err)
			}
			if tt.name == "TailscaleTwoReplicas" {
				vals["replicaCount"] = 2
			}
			_, err := deploytest.RenderChart(chartDir, "corral-vdi", "corral-vdi", vals)
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("rendering with %q: %v; want an error naming %s", tt.vals, err, tt.field)
			}
		})
	}
}

// TestChartH264: the h264 value sets the portal's CORRAL_VDI_H264, and
// only when given.
func TestChartH264(t *testing.T) {
	for _, want := range []string{"", "gst-launch-1.0"} {
		ch, err := deploytest.RenderChart(chartDir, "corral-vdi", "corral-vdi", map[string]any{"h264": want})
		if err != nil {
			t.Fatal(err)
		}
		d, err := deploytest.Deployment(ch.Objects)
		if err != nil {
			t.Fatal(err)
		}
		got, set := "", false
		for _, e := range d.Spec.Template.Spec.Containers[0].Env {
			if e.Name == "CORRAL_VDI_H264" {
				got, set = e.Value, true
			}
		}
		if got != want || set != (want != "") {
			t.Errorf("h264 %q: CORRAL_VDI_H264 %q (set %v); want %q, set only when given", want, got, set, want)
		}
	}
}

// TestChartMakesTheSecret: by default (secrets.create) the chart makes
// the Secret the Deployment reads, with every key the portal needs before
// it is ready and the metrics token (so /metrics is open to its bearer
// from the first install), each 32 random bytes as base64 text, as
// docs/operating.md's openssl rand makes them, and other keys at each
// fresh render; with create false it makes none.
func TestChartMakesTheSecret(t *testing.T) {
	secret := func(vals map[string]any) *unstructured.Unstructured {
		ch, err := deploytest.RenderChart(chartDir, "corral-vdi", "corral-vdi", vals)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range ch.Objects {
			if u.GetKind() == "Secret" && u.GetName() == "corral-vdi-secrets" {
				return u
			}
		}
		return nil
	}
	if u := secret(map[string]any{"secrets": map[string]any{"create": false}}); u != nil {
		t.Errorf("with secrets.create false the chart renders the Secret %s", u.GetName())
	}
	keys := func() map[string]string {
		if u := secret(nil); u != nil {
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			out := map[string]string{}
			for k, v := range data {
				text, err := base64.StdEncoding.DecodeString(v)
				if raw, err2 := base64.StdEncoding.DecodeString(string(text)); err != nil || err2 != nil || len(raw) != 32 {
					t.Errorf("key %s is %q; want 32 random bytes as base64 text", k, text)
				}
				out[k] = string(text)
			}
			return out
		}
		t.Fatal("with its default values the chart renders no Secret corral-vdi-secrets: /metrics stays closed (503) after helm install")
		return nil
	}
	first, second := keys(), keys()
	for _, k := range []string{"session-keys", "token-keys", "peer-secret", "metrics-token"} {
		if first[k] == "" || first[k] == second[k] {
			t.Errorf("key %s: %q, then %q; want a new random key at each fresh render", k, first[k], second[k])
		}
	}
}

// TestChartLint runs helm lint's rules on the chart with its defaults
// and each ci/ values file: no warnings, no errors.
func TestChartLint(t *testing.T) {
	for _, tt := range chartCases {
		vals := map[string]any{}
		if tt.values != "" {
			var err error
			if vals, err = deploytest.ReadValues(filepath.Join(chartDir, "ci", tt.values+"-values.yaml")); err != nil {
				t.Fatal(err)
			}
		}
		for _, m := range deploytest.LintChart(chartDir, "corral-vdi", vals) {
			t.Errorf("helm lint with the %s values: %v", tt.name, m)
		}
	}
}
