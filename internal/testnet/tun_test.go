package testnet

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testoutcome"
)

// TunForAll opens a closed TUN device up, skips where there is none, and
// fails where it cannot open it up (here an immutable file, which root
// may not chmod), so the host fence's rows never pass by not running.
func TestTunForAll(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("an immutable file needs root")
	}
	saved := geteuid
	geteuid = func() int { return 0 }
	defer func() { geteuid = saved }()
	closed := filepath.Join(t.TempDir(), "tun")
	if err := os.WriteFile(closed, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(closed, 0o600) // whatever the umask
	stuck := filepath.Join(t.TempDir(), "tun")
	if err := os.WriteFile(stuck, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chattr", "+i", stuck).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i (e2fsprogs) %s: %v: %s", stuck, err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", stuck).Run() })
	for _, tc := range []struct {
		name, device, skip, fail string
	}{
		{"Closed", closed, "", ""},
		{"Missing", filepath.Join(t.TempDir(), "tun"), "modprobe tun", ""},
		{"CannotOpenUp", stuck, "", "cannot be made 0666"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tunDevice = tc.device
			defer func() { tunDevice = "/dev/net/tun" }()
			got := testoutcome.Run(t, TunForAll)
			if (got.SkipMsg == "") != (tc.skip == "") || !strings.Contains(got.SkipMsg, tc.skip) ||
				(got.FailMsg == "") != (tc.fail == "") || !strings.Contains(got.FailMsg, tc.fail) {
				t.Errorf("TunForAll on %s: skipped %q, failed %q; want a skip saying %q, a failure saying %q", tc.device, got.SkipMsg, got.FailMsg, tc.skip, tc.fail)
			}
		})
	}
	if fi, err := os.Stat(closed); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("after TunForAll the closed device is %v, %v; want 0666", fi.Mode().Perm(), err)
	}
}
