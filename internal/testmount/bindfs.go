package testmount

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// fuseDevice is FUSE's device; a test of Bindfs replaces it.
var fuseDevice = "/dev/fuse"

// Bindfs mounts a bindfs view of back at view, with bindfs's options
// (e.g. "--chown-ignore"), and detaches it when the test ends. It skips
// the test only where the machine has no bindfs: no bindfs program, no
// FUSE device (or no driver behind it), a FUSE device the kernel refuses
// to open, or a mount the kernel refuses (EPERM: a container without
// CAP_SYS_ADMIN). Every other failure fails the test with what bindfs
// said.
func Bindfs(t testing.TB, back, view string, options ...string) {
	t.Helper()
	bin, err := exec.LookPath("bindfs")
	if err != nil {
		t.Skip("no bindfs: install the Debian package bindfs (scripts/deps.sh --test installs it)")
	}
	if why := fuseAbsent(); why != "" {
		t.Skip(why)
	}
	out, err := exec.Command(bin, append(options, back, view)...).CombinedOutput()
	said := strings.TrimSpace(string(out))
	if err != nil && strings.Contains(said, "Operation not permitted") {
		t.Skipf("bindfs %s: the kernel refuses the mount here (EPERM: a container without CAP_SYS_ADMIN): %s", view, said)
	}
	if err != nil {
		t.Fatalf("bindfs %s %s: %v: %s", back, view, err, said)
	}
	t.Cleanup(func() { unix.Unmount(view, unix.MNT_DETACH) })
}

// fuseAbsent returns why this machine has no usable FUSE device, or ""
// where it opens (or fails otherwise: bindfs then says how).
func fuseAbsent() string {
	f, err := os.OpenFile(fuseDevice, os.O_RDWR, 0)
	switch {
	case err == nil:
		f.Close()
		return ""
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, unix.ENODEV), errors.Is(err, unix.ENXIO):
		return "no FUSE: " + err.Error() + ": load the fuse module (modprobe fuse), or in a container pass the device in"
	case errors.Is(err, fs.ErrPermission):
		return "the kernel refuses FUSE here: " + err.Error() + " (a container's device rule?)"
	}
	return ""
}
