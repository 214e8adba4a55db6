package testvm

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/local"
)

// TestImage_OwnScriptsBuild: in a cache whose `current` is another
// checkout's build (another script's key), this checkout's script gives
// its own build, with package lists and without them (no apt-cache on
// PATH), where resolving through `current`, as tests did, gives the
// other one.
func TestImage_OwnScriptsBuild(t *testing.T) {
	own, err := Image()
	if err != nil {
		t.Fatal(err) // the build's own failure: skipping would hide it
	}
	cache := t.TempDir()
	mine := filepath.Join(cache, filepath.Base(own))
	other := filepath.Join(cache, "s0123456789ab-another-checkouts-script")
	must(t, os.Symlink(own, mine))
	must(t, os.Mkdir(other, 0o755))
	for _, f := range []string{"vmlinuz", "initramfs.gz"} {
		must(t, os.WriteFile(filepath.Join(other, f), []byte("another guest"), 0o644))
	}
	root, err := moduleRoot()
	must(t, err)
	script := filepath.Join(root, "scripts", "vm-image.sh")

	// No package lists: PATH has what the script needs but apt.
	bin := t.TempDir()
	for _, tool := range []string{"bash", "dpkg-deb", "sha256sum", "cut", "mkdir", "awk", "id"} {
		p, err := exec.LookPath(tool)
		must(t, err)
		must(t, os.Symlink(p, filepath.Join(bin, tool)))
	}
	for _, tc := range []struct{ name, path string }{{"package lists", os.Getenv("PATH")}, {"no package lists", bin}} {
		t.Run(tc.name, func(t *testing.T) {
			must(t, os.RemoveAll(filepath.Join(cache, "current")))
			must(t, os.Symlink(filepath.Base(other), filepath.Join(cache, "current")))
			if img, err := local.FindVMImage("", cache); err != nil || filepath.Dir(img.Kernel) != filepath.Join(cache, "current") {
				t.Fatalf("through current: %+v, %v", img, err)
			}
			t.Setenv("CORRAL_VDI_VM_IMAGE_CACHE", cache)
			t.Setenv("PATH", tc.path)
			got, err := Build(script)
			must(t, err)
			if got != mine {
				t.Errorf("the script gives %s; want its own build %s, not current's %s", got, mine, other)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
