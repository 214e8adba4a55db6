package portal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/cli"
)

// TestDoctor_Local runs doctor's local checks on this machine: the
// packages scripts/deps.sh installs are there (with versions), and a data
// directory others may read fails with the chmod that fixes it.
func TestDoctor_Local(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CORRAL_VDI_BACKEND": "local", "CORRAL_VDI_DATA_DIR": data, "HOME": t.TempDir()}
	var out bytes.Buffer
	e := cli.Env{Getenv: func(k string) string { return env[k] }, Out: &out, ErrOut: &out}
	err := Doctor(context.Background(), e, nil)
	if cli.ExitCode(err) != cli.ExitFailed {
		t.Fatalf("doctor with a 0755 data directory: %v; want exit %d\n%s", err, cli.ExitFailed, out.String())
	}
	if !strings.Contains(out.String(), "fix: chmod 700 "+data) {
		t.Fatalf("doctor does not say how to fix the data directory:\n%s", out.String())
	}
	for _, want := range []string{"ok    package        tigervnc-standalone-server", "freerdp2-shadow-x11: FreeRDP version", "qemu-system-x86: QEMU emulator version"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out.String())
		}
	}
	// 0711, as serve makes it for sandboxed desktops, with every file in
	// it 0600: private. A file others may read is not.
	if err := os.Chmod(data, 0o711); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(data, "cookie.keys")
	if err := os.WriteFile(key, []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Doctor(context.Background(), e, nil); cli.ExitCode(err) != cli.ExitFailed || !strings.Contains(out.String(), "fix: chmod 600 "+key) {
		t.Fatalf("doctor with a 0644 key in a 0711 data directory: %v; want a failure naming chmod 600 %s\n%s", err, key, out.String())
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := Doctor(context.Background(), e, nil); err != nil {
		t.Fatalf("doctor on a machine set up by scripts/deps.sh: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "0 fail") {
		t.Fatalf("doctor summary:\n%s", out.String())
	}
	// This root CI host gives every kernel limit (cgroup v1 memory and
	// pids, tmpfs mounts) and pasta for outbound pools.
	if os.Geteuid() == 0 {
		for _, want := range []string{"desktop-limits", "cgroup v1 memory and pids", "desktop-network", "through pasta"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("doctor output lacks %q:\n%s", want, out.String())
			}
		}
	}
}
