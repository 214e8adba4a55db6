package testmount

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testoutcome"
	"golang.org/x/sys/unix"
)

// Mount skips its test only where the machine cannot mount (not root, a
// kernel that refuses root, a kernel without the filesystem), saying
// which; any other error of mount(2) fails the test with it.
func TestMount_SkipsOnlyWhatIsAbsent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		euid  int
		err   error
		skip  bool
		about string // what the skip or failure must say
	}{
		{"NotRoot", 1000, nil, true, "needs root"},
		{"RootRefused", 0, unix.EPERM, true, "CAP_SYS_ADMIN"},
		{"NoSuchFilesystem", 0, unix.ENODEV, true, "no tmpfs filesystem"},
		{"NoMountPoint", 0, unix.ENOENT, false, "no such file"},
		{"BadOption", 0, unix.EINVAL, false, "invalid argument"},
		{"Busy", 0, unix.EBUSY, false, "busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			savedEUID, savedMount := geteuid, mount
			defer func() { geteuid, mount = savedEUID, savedMount }()
			geteuid = func() int { return tc.euid }
			mount = func(string, string, string, uintptr, string) error { return tc.err }
			got := testoutcome.Run(t, func(t testing.TB) { Tmpfs(t, "/nonexistent/cvmount", "4m") })
			got.Want(t, tc.skip, tc.about, fmt.Sprintf("Tmpfs as uid %d with mount(2) saying %v", tc.euid, tc.err))
		})
	}
}

// Tmpfs mounts a real tmpfs of the size asked for, gone when its test
// ends.
func TestTmpfs(t *testing.T) {
	dir := t.TempDir()
	t.Run("mounted", func(t *testing.T) {
		Tmpfs(t, dir, "4m")
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil || st.Type != unix.TMPFS_MAGIC || st.Blocks*uint64(st.Bsize) != 4<<20 {
			t.Fatalf("statfs %s: type %#x, %d bytes, %v; want a tmpfs of 4 MiB", dir, st.Type, st.Blocks*uint64(st.Bsize), err)
		}
		if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(filepath.Join(dir, "f")); err == nil {
		t.Errorf("after its test %s still holds the tmpfs's file; want the tmpfs gone", dir)
	}
}
