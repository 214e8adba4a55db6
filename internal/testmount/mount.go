// Package testmount mounts filesystems for tests (a small tmpfs, a FUSE
// view that ignores ownership) and skips a test only where the machine
// truly cannot, saying why; any other failure fails the test with what
// the kernel or the tool said, so a test that needs the mount (an attack
// row, a full disk) never passes by not running.
package testmount

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// geteuid and mount are os.Geteuid and unix.Mount; a test of the
// skip-or-fail decision replaces them.
var (
	geteuid = os.Geteuid
	mount   = unix.Mount
)

// Mount mounts a filesystem of fstype from source at target with data
// (mount(2)'s options, e.g. "size=4m") and detaches it when the test
// ends. It skips the test only where the machine cannot mount it: not
// root, a kernel that refuses root (EPERM: a container without
// CAP_SYS_ADMIN, or a security-module rule), or a kernel without the
// filesystem (ENODEV). Every other error fails the test.
func Mount(t testing.TB, source, target, fstype, data string) {
	t.Helper()
	if geteuid() != 0 {
		t.Skipf("mounting a %s needs root", fstype)
	}
	err := mount(source, target, fstype, 0, data)
	switch {
	case errors.Is(err, unix.EPERM):
		t.Skipf("mount %s at %s: the kernel refuses root here (EPERM: a container without CAP_SYS_ADMIN, or a security-module rule)", fstype, target)
	case errors.Is(err, unix.ENODEV):
		t.Skipf("mount %s at %s: this kernel has no %s filesystem (ENODEV)", fstype, target, fstype)
	case err != nil:
		t.Fatalf("mount %s at %s (%s): %v", fstype, target, data, err)
	}
	t.Cleanup(func() { unix.Unmount(target, unix.MNT_DETACH) })
}

// Tmpfs mounts a tmpfs of size (e.g. "4m") at dir, as Mount.
func Tmpfs(t testing.TB, dir, size string) {
	t.Helper()
	Mount(t, "tmpfs", dir, "tmpfs", "size="+size)
}
