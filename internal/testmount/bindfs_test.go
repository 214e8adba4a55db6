package testmount

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testoutcome"
)

// Bindfs skips its test only where the machine has no bindfs (no
// program, no FUSE device, a device or a mount the kernel refuses),
// saying which; any other failure of bindfs fails the test with what
// bindfs said. A fake bindfs on PATH says each thing.
func TestBindfs_SkipsOnlyWhatIsAbsent(t *testing.T) {
	dev := filepath.Join(t.TempDir(), "fuse")
	if err := os.WriteFile(dev, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	refused := filepath.Join(t.TempDir(), "fuse") // open for writing refused, even to root
	if err := os.WriteFile(refused, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chattr", "+i", refused).CombinedOutput(); err != nil {
			t.Fatalf("chattr +i (e2fsprogs) %s: %v: %s", refused, err, out)
		}
		t.Cleanup(func() { exec.Command("chattr", "-i", refused).Run() })
	} else {
		os.Chmod(refused, 0)
	}
	for _, tc := range []struct {
		name   string
		device string
		said   string // by the fake bindfs, which fails when it says something; "" for no bindfs
		exit   int
		skip   bool
		about  string // what the skip or failure must say
	}{
		{"NoBindfs", dev, "", 0, true, "install the Debian package bindfs"},
		{"NoFuseDevice", dev + "-missing", "never run", 1, true, "modprobe fuse"},
		{"FuseRefused", refused, "never run", 1, true, "refuses FUSE"},
		{"MountRefused", dev, "fusermount: mount failed: Operation not permitted", 1, true, "EPERM"},
		{"MountPointNotEmpty", dev, "fuse: mountpoint is not empty", 1, false, "mountpoint is not empty"},
		{"NoSuchSource", dev, "bindfs: Failed to resolve source directory `/x': No such file or directory", 1, false, "Failed to resolve"},
		{"Killed", dev, "", 137, false, "exit status 137"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := t.TempDir()
			if tc.said != "" || tc.exit != 0 {
				said := filepath.Join(bin, "said")
				script := fmt.Sprintf("#!/bin/sh\nwhile IFS= read -r l; do echo \"$l\"; done <%q >&2\nexit %d\n", said, tc.exit)
				if err := os.WriteFile(said, []byte(tc.said+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(bin, "bindfs"), []byte(script), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv("PATH", bin)
			fuseDevice = tc.device
			defer func() { fuseDevice = "/dev/fuse" }()
			got := testoutcome.Run(t, func(t testing.TB) { Bindfs(t, "/nonexistent/back", "/nonexistent/view", "--chown-ignore") })
			got.Want(t, tc.skip, tc.about, fmt.Sprintf("Bindfs with bindfs saying %q on %s", tc.said, tc.device))
		})
	}
}

// Bindfs mounts a real view that accepts chown and ignores it, gone when
// its test ends.
func TestBindfs(t *testing.T) {
	back, view := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(back, "f"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("mounted", func(t *testing.T) {
		Bindfs(t, back, view, "--chown-ignore", "--chmod-ignore")
		if err := os.Chown(filepath.Join(view, "f"), 4242, 4242); err != nil {
			t.Errorf("chown in the view: %v; want it accepted", err)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(back, "f"), &st); err != nil || st.Uid == 4242 {
			t.Errorf("the file behind the view: uid %d, %v; want its owner kept", st.Uid, err)
		}
	})
	if _, err := os.Stat(filepath.Join(view, "f")); err == nil {
		t.Errorf("after its test %s still shows %s; want the view gone", view, back)
	}
}
