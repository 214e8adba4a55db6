package local

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// A desktop's disk is bounded where the portal is root: its /tmp, its
// scratch (/run, /var and /dev/shm together: sandbox_scratch.go), its run
// folder and the home of an ephemeral member are size-capped tmpfs mounts
// (Limits.Disk each) that root mounts on the member's folders before the desktop
// starts and unmounts before they are wiped. A write past the bound fails
// with ENOSPC in the desktop, and the portal's disk (its database) keeps
// its room. tmpfs pages are charged to the desktop's memory cgroup too.
// A persistent member's home stays on the data disk: a tmpfs would lose
// it with the host, and a filesystem image per member is not made yet.

// mountDisk mounts a tmpfs of u's disk bound on dir (an empty folder of the
// portal's tree), owned by u; nothing when u has no bound or is not its
// own uid (only root may mount), or when dir is a mount already.
func (u *DesktopUser) mountDisk(dir string) error {
	if u == nil || !u.own || u.Limits.Disk == 0 || isMountpoint(dir) {
		return nil
	}
	opts := "size=" + strconv.FormatUint(u.Limits.Disk, 10) + ",mode=0700,uid=" + strconv.Itoa(u.UID) + ",gid=" + strconv.Itoa(u.GID)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount the disk bound on %s: %w", dir, err)
	}
	return nil
}

// stateBound is the size of a sandboxed member's state folder (its
// processes' logs, pids file and RDP password) where the portal is root:
// a desktop that writes to its stdout without end fills this tmpfs, not
// the portal's disk. Xvnc's log stays far below it.
const stateBound = 16 << 20

// mountState mounts a tmpfs of stateBound on the member's state folder
// dir, the portal's own (0700), where mountDisk would bound the desktop's
// disk; nothing when dir is a mount already. What an older portal left in
// dir is removed first: the mount would hide it.
func (u *DesktopUser) mountState(dir string) error {
	if u == nil || !u.own || u.Limits.Disk == 0 || isMountpoint(dir) {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size="+strconv.Itoa(stateBound)+",mode=0700"); err != nil {
		return fmt.Errorf("mount the bound of the state folder %s: %w", dir, err)
	}
	return nil
}

// unmountDisk unmounts what mountDisk mounted on dir, if anything.
func unmountDisk(dir string) error {
	if !isMountpoint(dir) {
		return nil
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// isMountpoint reports whether dir (never through a symlink) is on
// another filesystem than its parent.
func isMountpoint(dir string) bool {
	var st, parent unix.Stat_t
	if unix.Lstat(dir, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	if unix.Lstat(filepath.Dir(dir), &parent) != nil {
		return false
	}
	return st.Dev != parent.Dev
}

// unmountMember unmounts the disk bounds of the member whose folder is dir.
func unmountMember(dir string) error {
	return errors.Join(unmountDisk(filepath.Join(dir, "home")), unmountDisk(filepath.Join(dir, memberTmpName)),
		unmountDisk(filepath.Join(dir, "run")), unmountDisk(filepath.Join(dir, memberScratchName)),
		unmountDisk(filepath.Join(dir, memberStateName)))
}

// diskMissing says why desktops get no disk bound here; "" when they do.
func (s *Sandbox) diskMissing() string {
	if s.limits.Disk == 0 || s.ownUIDs {
		return ""
	}
	return "no disk bound for desktops' home and /tmp: a portal that is not root cannot mount their size-capped tmpfs; they share the data dir's disk"
}
