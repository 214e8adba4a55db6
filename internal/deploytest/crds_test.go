package deploytest_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/yaml"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// The CRDs the overlays' kinds need, read from the Go module cache (go mod
// download), never committed: the Gateway API's standard channel,
// CloudNativePG's Cluster and Cilium's policies.
var crdSources = []struct{ module, dir string }{
	{"sigs.k8s.io/gateway-api@v1.6.0", "config/crd/standard"},
	{"github.com/cloudnative-pg/cloudnative-pg@v1.28.0", "config/crd/bases"},
	{"github.com/cilium/cilium@v1.18.0", "pkg/k8s/apis/cilium.io/client/crds/v2"},
}

// moduleDir downloads module@version into the module cache and returns its
// folder.
func moduleDir(t *testing.T, module string) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", module)
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); err != nil || jerr != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: %v %s %s (the Go module proxy must answer)", module, err, m.Error, out)
	}
	return m.Dir
}

// installCRDs applies the CRDs of crdSources to c and waits until the API
// server serves their kinds.
func installCRDs(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	var crds []*unstructured.Unstructured
	for _, s := range crdSources {
		files, err := filepath.Glob(filepath.Join(moduleDir(t, s.module), s.dir, "*.yaml"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no CRDs in %s/%s: %v", s.module, s.dir, err)
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, u)
			}
		}
	}
	if _, err := deploytest.Apply(c.Config, crds, false); err != nil {
		t.Fatal(err)
	}
	disc := discovery.NewDiscoveryClientForConfigOrDie(c.Config)
	for _, gv := range []string{"gateway.networking.k8s.io/v1", "postgresql.cnpg.io/v1", "cilium.io/v2"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if _, err := disc.ServerResourcesForGroupVersion(gv); err == nil {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s is not served 30s after its CRDs: %v", gv, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}
