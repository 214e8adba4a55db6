package local

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
)

// The folders of a sandboxed member, under members/<name>/ (root, 0711:
// the desktop may pass through, not list):
//
//	uid    the member's uid (portal, 0600)
//	state  pids file, logs, RDP password (portal, 0700; a tmpfs of
//	       stateBound where the portal is root)
//	run    sockets, Xauthority, RDP SAM and server home (the uid, 0700)
//	home   HOME (the uid, 0700)
//
// The portal, as root, writes into run only after every process of the uid
// is dead and run has been made afresh, so no symlink or file the user
// planted there is ever written through.

// x11Dirs are the socket folders X clients and servers expect in /tmp,
// world-writable with the sticky bit; made in each member's own /tmp.
var x11Dirs = []string{"/tmp/.X11-unix", "/tmp/.ICE-unix"}

// prepareSandboxDirs kills what is left of the member's uid, makes a fresh
// run folder and hands it and the home to the uid.
func prepareSandboxDirs(spec DesktopSpec, log *slog.Logger) error {
	u := spec.User
	killLegacyDesktop(spec, log)
	if err := u.killLeftovers(desktopStopGrace); err != nil {
		return err
	}
	if err := u.mountState(spec.State); err != nil { // its logs: bounded
		return err
	}
	// The member's folder: the uid passes through it to run and home (an
	// older portal made it 0700).
	if err := os.MkdirAll(filepath.Dir(spec.Dir), 0o711); err != nil {
		return err
	}
	if err := os.Chmod(filepath.Dir(spec.Dir), 0o711); err != nil {
		return err
	}
	if err := u.freshDisk(spec.Dir); err != nil { // on the data disk: bounded
		return err
	}
	if err := os.MkdirAll(spec.Home, 0o700); err != nil {
		return err
	}
	var st syscall.Stat_t
	if err := syscall.Lstat(spec.Home, &st); err != nil {
		return err
	}
	if int(st.Uid) != u.UID { // new, or from before desktops had uids
		if err := chownTree(spec.Home, u.UID, u.GID); err != nil {
			return fmt.Errorf("hand the home to uid %d: %w", u.UID, err)
		}
	}
	if spec.Ephemeral { // wiped on release anyway: a tmpfs bounds it
		if err := u.mountDisk(spec.Home); err != nil {
			return err
		}
	} else {
		u.mountHome(filepath.Dir(spec.Dir), spec.Home, log)
	}
	if err := u.freshScratch(); err != nil {
		return err
	}
	return u.freshTmp()
}

// give hands path (never a symlink's target) to u; nil u does nothing.
func (u *DesktopUser) give(path string) error {
	if u == nil {
		return nil
	}
	return os.Lchown(path, u.UID, u.GID)
}

// chownTree hands every file under root to uid:gid without following
// symlinks.
func chownTree(root string, uid, gid int) error {
	return filepath.WalkDir(root, func(path string, _ fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// killLegacyDesktop kills a desktop a portal without sandboxing started
// for this member, recorded in the pids file it kept in Dir. It is
// believed only while Dir is still the portal's (its parent is the
// portal's too, so the user cannot swap it): once Dir belongs to the
// desktop's uid, which could plant any PIDs there, it is never read.
func killLegacyDesktop(spec DesktopSpec, log *slog.Logger) {
	var st syscall.Stat_t
	if err := syscall.Lstat(spec.Dir, &st); err != nil || int(st.Uid) != os.Getuid() || st.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return
	}
	if err := syscall.Lstat(filepath.Join(spec.Dir, desktopPidsName), &st); err != nil {
		return
	}
	if int(st.Uid) != os.Getuid() || st.Nlink != 1 || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return
	}
	if err := killRecordedDesktop(spec.Dir, log); err != nil {
		log.Warn("desktop: could not stop the unsandboxed desktop of an older portal", "err", err)
	}
}
