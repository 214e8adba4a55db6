package portal

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/cli"
	"github.com/corral-dev/corral-vdi-portal/local"
)

// TestDoctor_HostFence: doctor says the host fence of a root portal's
// desktop uids is not in place until it is installed, then names its
// table.
func TestDoctor_HostFence(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("desktops get uids of their own, and a fence, only from a root portal")
	}
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"CORRAL_VDI_BACKEND": "local", "CORRAL_VDI_DATA_DIR": data, "HOME": t.TempDir(), "CORRAL_VDI_DESKTOP_UIDS": "202600-202699"}
	var out bytes.Buffer
	e := cli.Env{Getenv: func(k string) string { return env[k] }, Out: &out, ErrOut: &out}
	f := local.NewHostFence(202600, 202699, filepath.Join(data, localDirName))
	t.Cleanup(func() { f.Remove() })
	f.Remove()
	Doctor(context.Background(), e, nil)
	if !strings.Contains(out.String(), "warn  host-fence") || !strings.Contains(out.String(), "is not in place") {
		t.Errorf("doctor without the fence:\n%s\nwant a host-fence warning that it is not in place", out.String())
	}
	if err := f.Install(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	Doctor(context.Background(), e, nil)
	if want := "ok    host-fence     nftables table inet " + f.Table(); !strings.Contains(out.String(), want) {
		t.Errorf("doctor with the fence:\n%s\nwant %q", out.String(), want)
	}
}
