package e2e

import (
	"bufio"
	"os"
	"sort"
	"strings"

	"golang.org/x/sys/unix"
)

// removeData removes a portal's data directory once the portal is gone,
// unmounting first the size-capped tmpfs of its desktops' /tmp and homes
// (a root portal mounts them; they outlive it, as its desktops do).
func removeData(dir string) {
	mounts := mountsUnder(dir)
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		unix.Unmount(m, unix.MNT_DETACH)
	}
	os.RemoveAll(dir)
}

// mountsUnder lists the mount points under dir.
func mountsUnder(dir string) []string {
	var mounts []string
	if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if fields := strings.Fields(sc.Text()); len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
				mounts = append(mounts, fields[4])
			}
		}
		f.Close()
	}
	return mounts
}
