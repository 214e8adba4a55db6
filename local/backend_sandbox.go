package local

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// checkSandboxDirs makes the members folder passable (0711) for desktop
// uids and checks they can reach it and that its filesystem keeps owners.
// The error is one line saying what to change.
func checkSandboxDirs(dir string, s *Sandbox) error {
	if s.Namespaced() {
		return nil // every desktop runs as the portal's uid, in its own view of the files
	}
	members := filepath.Join(dir, "members")
	for _, d := range []string{dir, members} {
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("local desktops are off: %w", err)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("local desktops are off: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("local desktops are off: %s (mode %04o) does not let other users through, and each desktop runs as a uid of its own that must reach its folder under %s: run chmod o+x %s, or set CORRAL_VDI_DATA_DIR under a folder that does (e.g. /var/lib/corral-vdi)", p, fi.Mode().Perm(), abs, p)
		}
		if p == "/" {
			break
		}
	}
	return probeOwnership(members, s.first)
}

// probeOwnership checks that dir's filesystem records a file's owner and
// mode (vfat, some network and FUSE filesystems ignore both).
func probeOwnership(dir string, uid int) error {
	probe := filepath.Join(dir, ".ownership-probe")
	os.Remove(probe)
	f, err := os.OpenFile(probe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("local desktops are off: %w", err)
	}
	f.Close()
	defer os.Remove(probe)
	chownErr := os.Lchown(probe, uid, uid)
	chmodErr := os.Chmod(probe, 0o640)
	var st syscall.Stat_t
	if err := syscall.Lstat(probe, &st); err != nil {
		return fmt.Errorf("local desktops are off: %w", err)
	}
	if chownErr != nil || chmodErr != nil || int(st.Uid) != uid || st.Mode&0o777 != 0o640 {
		return fmt.Errorf("local desktops are off: the filesystem of %s does not keep file owners and modes, so desktops could not be kept apart; put CORRAL_VDI_DATA_DIR on one that does (ext4, xfs, btrfs, tmpfs)", dir)
	}
	return nil
}

// memberDir is the folder of member name.
func (b *Backend) memberDir(name string) string { return filepath.Join(b.dir, "members", name) }

// desktopSpec returns where and as whom member name's desktop runs, or why
// local desktops cannot run (the sandbox could not be set up).
func (b *Backend) desktopSpec(name string) (DesktopSpec, error) {
	spec := b.spec(name)
	if b.refuse != nil {
		return spec, b.refuse
	}
	if b.sandbox == nil {
		return spec, nil
	}
	u, err := b.sandbox.user(b.memberDir(name))
	if err != nil {
		return spec, err
	}
	spec.State = filepath.Join(b.memberDir(name), memberStateName)
	spec.User = u
	return spec, nil
}

// wipeMember leaves nothing of a sandboxed member's user behind: no
// process of its uid (setsid and nohup leftovers included), no file of it
// in the shared temporary folders, no home and no run folder.
func (b *Backend) wipeMember(name string) error {
	if b.sandbox == nil {
		return nil
	}
	if err := unmountMember(b.memberDir(name)); err != nil {
		return err
	}
	// A persistent member's home image goes too (its pool became
	// ephemeral, or the member is deleted).
	if err := os.Remove(filepath.Join(b.memberDir(name), homeImageName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if b.sandbox.Namespaced() { // nothing of it runs: Stop ended its namespaces
		return errors.Join(os.RemoveAll(b.spec(name).Dir), os.RemoveAll(filepath.Join(b.memberDir(name), memberTmpName)), os.RemoveAll(filepath.Join(b.memberDir(name), memberScratchName)))
	}
	uid, err := readMemberUID(b.memberDir(name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if err := killUID(uid, 5*time.Second); err != nil {
		return err
	}
	// Root removes the member's own folders through directory descriptors
	// (os.RemoveAll: unlinkat, openat O_NOFOLLOW), beneath a folder of its
	// own, so no symlink of the user's redirects it.
	spec := b.spec(name)
	return errors.Join(wipeTmpOf(uid), os.RemoveAll(spec.Dir), os.RemoveAll(filepath.Join(b.memberDir(name), memberTmpName)), os.RemoveAll(filepath.Join(b.memberDir(name), memberScratchName)))
}

// networkOf is the network of pool p's session desktops: its policy, by
// default outbound, unless the host says none for all.
func (b *Backend) networkOf(p vdi.Pool) string {
	if b.network == NetworkNone || p.Policy.Network == vdi.NetworkNone {
		return NetworkNone
	}
	return NetworkOutbound
}

// leftIn names up to eight of the paths under dir, for a log line.
func leftIn(dir string) string {
	var found []string
	filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if path != dir && err == nil {
			found = append(found, strings.TrimPrefix(path, dir+"/"))
		}
		if len(found) >= 8 {
			return fs.SkipAll
		}
		return nil
	})
	return strings.Join(found, ", ")
}
