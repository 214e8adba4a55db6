package portal

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// update rewrites the golden files: docs/configuration.md and testdata/.
var update = flag.Bool("update", false, "rewrite the golden files (docs/configuration.md, testdata/)")

// TestConfigReference: docs/configuration.md is what make docs writes from
// the settings table now.
func TestConfigReference(t *testing.T) {
	path := filepath.Join("..", "docs", "configuration.md")
	got := ConfigReference()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("docs/configuration.md is not what the settings table says: run make docs")
	}
	for _, env := range []string{"CORRAL_VDI_TOKEN_KEYS", "CORRAL_VDI_TOKEN_KEYS_FILE", "CORRAL_VDI_SESSION_KEYS", "KUBECONFIG", "CORRAL_VDI_SHARED_SECRETS_FROM"} {
		if !ConfigEnvNames()[env] {
			t.Errorf("ConfigEnvNames lacks %s", env)
		}
	}
}
