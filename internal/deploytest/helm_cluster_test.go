package deploytest_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// checkChartOnCluster applies what the chart renders (its objects and its
// helm test pods) for the defaults, each ci/ values file and the values
// the overlays do not cover, to c with server-side dry-run and strict
// field validation, as helm install --dry-run=server would; the pods are
// admitted under the namespace's Pod Security "restricted".
func checkChartOnCluster(t *testing.T, c *testcluster.Cluster) {
	cases := map[string]map[string]any{
		// A DSN from an existing Secret, a pool namespace the operator made,
		// an Ingress without TLS, more environment.
		"Other": {
			"database":       map[string]any{"existingSecret": "corral-vdi-db", "podSelector": map[string]any{"matchLabels": map[string]any{"app": "postgres"}}},
			"poolNamespaces": []any{map[string]any{"name": "corral-vdi-desktops"}},
			"ingress":        map[string]any{"enabled": true, "className": "haproxy", "host": "vdi.example.org"},
			"extraEnv":       []any{map[string]any{"name": "CORRAL_VDI_DISCONNECT_GRACE", "value": "30m"}},
			"image":          map[string]any{"digest": "sha256:" + strings.Repeat("ab", 32)},
		},
	}
	for _, tt := range chartCases {
		cases[tt.name] = nil
		if tt.values != "" {
			vals, err := deploytest.ReadValues(filepath.Join(chartDir, "ci", tt.values+"-values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			cases[tt.name] = vals
		}
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			ch, err := deploytest.RenderChart(chartDir, "corral-vdi", "corral-vdi", vals)
			if err != nil {
				t.Fatal(err)
			}
			if len(ch.Hooks) != 2 {
				t.Errorf("the chart has %d helm test hooks; want readyz and signin", len(ch.Hooks))
			}
			// The Prometheus Operator's kinds are left out: the module proxy
			// serves its Go types, not its CRDs.
			objs := slices.DeleteFunc(append(ch.Objects, ch.Hooks...), func(u *unstructured.Unstructured) bool {
				return u.GroupVersionKind().Group == "monitoring.coreos.com"
			})
			applied, err := deploytest.Apply(c.Config, objs, true)
			if err != nil {
				t.Fatal(err)
			}
			d, err := deploytest.Deployment(applied)
			if err != nil {
				t.Fatal(err)
			}
			checkRestricted(t, c, d)
			if name != "Other" {
				return
			}
			env, err := deploytest.PortalEnv(d, deploytest.Values{Secrets: map[string]string{"corral-vdi-db/url": "postgres://db/corral"}})
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"CORRAL_VDI_DATABASE_URL=postgres://db/corral", "CORRAL_VDI_DISCONNECT_GRACE=30m"} {
				if !slices.Contains(env, want) {
					t.Errorf("the portal's environment %v; want %s", env, want)
				}
			}
			if img := d.Spec.Template.Spec.Containers[0].Image; !strings.HasSuffix(img, "@sha256:"+strings.Repeat("ab", 32)) {
				t.Errorf("image %s; want it pinned by image.digest", img)
			}
		})
	}
}
