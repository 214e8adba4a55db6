package local

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A persistent member's home outlives its desktop, the portal and the
// host's restarts, so a tmpfs cannot bound it: a root portal keeps it in a
// sparse ext4 image of Limits.Home bytes, members/<name>/home.img (root's,
// 0600, in the member's folder, root's and 0711), loop-mounted on
// members/<name>/home before the desktop starts. The mount stays on the
// host across releases and portal restarts; a later start finds it mounted
// and leaves it, a host restart mounts the image again. A write past the
// bound fails with ENOSPC inside the desktop, and the data disk (the
// portal's database) keeps its room. Root only ever names paths in folders
// of its own (the image, the mount point); what the desktop wrote is read
// by the kernel's ext4, never by root, except by cp running as the
// member's uid when a home from before bounds is moved into its image.
// Where the portal is not root, or the host has no loop devices or no
// mkfs.ext4, the home stays on the data disk: doctor and the log say so.

// homeImageName is the file in a member's folder that holds its home.
const homeImageName = "home.img"

// defaultLoopControl is the kernel's loop device allocator.
const defaultLoopControl = "/dev/loop-control"

// homeDisks are the tools that make and mount home images.
type homeDisks struct {
	mkfs, mount, fsck, cp string
}

// findHomeDisks finds what home images need, or says in one line why this
// host cannot have them.
func findHomeDisks(root bool, loopControl string) (*homeDisks, error) {
	if !root {
		return nil, errors.New("persistent homes have no disk bound: a portal that is not root cannot loop-mount a home image; they share the data dir's disk")
	}
	if loopControl == "" {
		loopControl = defaultLoopControl
	}
	if fi, err := os.Stat(loopControl); err != nil || fi.Mode()&fs.ModeCharDevice == 0 {
		return nil, fmt.Errorf("persistent homes have no disk bound: this host has no loop devices (%s is missing; modprobe loop, or give the container the loop devices); they share the data dir's disk", loopControl)
	}
	var h homeDisks
	for _, t := range []struct {
		dst        *string
		name, from string
	}{{&h.mkfs, "mkfs.ext4", "e2fsprogs"}, {&h.fsck, "e2fsck", "e2fsprogs"}, {&h.mount, "mount", "mount"}, {&h.cp, "cp", "coreutils"}} {
		p, err := exec.LookPath(t.name)
		if err != nil {
			return nil, fmt.Errorf("persistent homes have no disk bound: %s not found (install the Debian package %s); they share the data dir's disk", t.name, t.from)
		}
		*t.dst = p
	}
	return &h, nil
}

// HomeMissing says in one line why persistent members' homes have no disk
// bound here; "" when they have one.
func (s *Sandbox) HomeMissing() string {
	switch {
	case s == nil:
		return ""
	case s.limits.Home == 0:
		return "persistent homes have no disk bound (home=off in CORRAL_VDI_DESKTOP_LIMITS); they share the data dir's disk"
	case s.homeErr != nil:
		return s.homeErr.Error()
	}
	return ""
}

// mountHome bounds the home of u's persistent member, whose folder is
// member: it makes the member's image when it has none (moving a home from
// before bounds into it) and mounts it on home. Where the host gives no
// image, or mounting fails, the home stays unbounded (the desktop still
// starts) and the log says so.
func (u *DesktopUser) mountHome(member, home string, log *slog.Logger) {
	if u == nil || !u.own || u.Limits.Home == 0 || isMountpoint(home) {
		return
	}
	if u.homes == nil {
		log.Warn("desktop: the home has no disk bound", "member", filepath.Base(member), "why", u.homeErr)
		return
	}
	img := filepath.Join(member, homeImageName)
	fresh, err := u.homes.makeImage(img, u.Limits.Home, u.UID, u.GID)
	if err != nil {
		log.Warn("desktop: the home has no disk bound", "member", filepath.Base(member), "err", err)
		return
	}
	if fresh && !emptyDir(home) {
		if err := u.moveIntoImage(img, member, home); err != nil {
			os.Remove(img)
			log.Warn("desktop: the home has no disk bound: it could not move into its image", "member", filepath.Base(member), "err", err)
			return
		}
		fresh = false
	}
	if err := u.homes.mountImage(img, home, fresh); err != nil {
		log.Warn("desktop: the home has no disk bound", "member", filepath.Base(member), "err", err)
	}
}

// makeImage makes a sparse ext4 image of size bytes at img, its root owned
// by uid:gid, unless one is there; fresh says it made one. A half-made
// image is never left at img.
func (h *homeDisks) makeImage(img string, size uint64, uid, gid int) (fresh bool, err error) {
	if _, err := os.Lstat(img); err == nil {
		return false, nil
	}
	tmp := img + ".new"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return false, err
	}
	err = f.Truncate(int64(size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = run(h.mkfs, "-q", "-F", "-m", "0", "-L", "corral-home", "-E", "root_owner="+strconv.Itoa(uid)+":"+strconv.Itoa(gid), tmp)
	}
	if err == nil {
		err = os.Rename(tmp, img)
	}
	if err != nil {
		os.Remove(tmp)
		return false, fmt.Errorf("make the home image %s: %w", img, err)
	}
	return true, nil
}

// mountImage checks img (a host crash may have left it unclean) and
// mounts it on dir, never through a symlink. A fresh image's root (mkfs
// makes it 0755) becomes 0700: other desktops' uids pass through the
// member's folder.
func (h *homeDisks) mountImage(img, dir string, fresh bool) error {
	if err := exec.Command(h.fsck, "-p", img).Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() > 1 { // 1: errors corrected
			return fmt.Errorf("check the home image %s: %w", img, err)
		}
	}
	if err := run(h.mount, "--no-canonicalize", "-t", "ext4", "-o", "loop,nosuid,nodev,noatime", img, dir); err != nil {
		return err
	}
	if fresh {
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// moveIntoImage copies what home held before it had a bound into img, as
// the member's uid, then empties home. Nothing of the uid runs.
func (u *DesktopUser) moveIntoImage(img, member, home string) error {
	stage := filepath.Join(member, "home.move")
	unmountDisk(stage)
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	if err := os.Mkdir(stage, 0o700); err != nil {
		return err
	}
	defer os.Remove(stage)
	if err := u.homes.mountImage(img, stage, true); err != nil {
		return err
	}
	cp := exec.Command(u.homes.cp, "-a", "--", home+"/.", stage+"/")
	cp.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: []uint32{}}}
	out, err := cp.CombinedOutput()
	if uerr := unmountDisk(stage); err == nil && uerr != nil {
		return uerr
	}
	if err != nil {
		return fmt.Errorf("cp: %v: %s", err, lastLine(string(out)))
	}
	// RemoveAll works through directory descriptors and never follows a
	// symlink the user left in the home.
	if err := os.RemoveAll(home); err != nil {
		return err
	}
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	return u.give(home)
}

// emptyDir reports whether dir has no entries (or cannot be read).
func emptyDir(dir string) bool {
	f, err := os.Open(dir)
	if err != nil {
		return true
	}
	defer f.Close()
	names, _ := f.Readdirnames(1)
	return len(names) == 0
}

// run runs a tool and returns its last line of output as the error.
func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", filepath.Base(name), err, lastLine(string(out)))
	}
	return nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
