package local

import (
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// command returns the command that runs path with args as u: through
// prlimit, which sets u's limits on itself and execs path, keeping the PID,
// the open files and the environment. A nil u runs path directly.
func (u *DesktopUser) command(path string, args ...string) *exec.Cmd {
	return u.commandFor(false, path, args...)
}

// terminalCommand is command for a terminal's shell, which keeps the
// session (and so the pty) it is started in.
func (u *DesktopUser) terminalCommand(path string, args ...string) *exec.Cmd {
	return u.commandFor(true, path, args...)
}

// commandFor is command; a namespaced u runs prlimit inside bubblewrap.
func (u *DesktopUser) commandFor(terminal bool, path string, args ...string) *exec.Cmd {
	if u == nil {
		return exec.Command(path, args...)
	}
	argv := append([]string{path}, args...)
	if !u.bare {
		argv = append(append([]string{u.prlimit}, u.Limits.prlimitArgs()...), argv...)
	}
	if u.ns != nil && !u.bare {
		for i := range argv {
			argv[i] = u.ns.inside(argv[i])
		}
		argv = append(append([]string{u.ns.bwrap}, u.ns.args(terminal, u.joined())...), argv...)
		if u.joined() { // the desktop's one network namespace
			argv = u.net.nsenterArgs(argv)
		}
	}
	// A desktop process's bubblewrap dies with a shell of its own, a
	// terminal's with the portal (a terminal is the portal's session).
	child := u.ns != nil && !u.bare && !terminal
	switch {
	case u.cg != nil: // into the desktop's cgroup first, then its namespaces
		argv = u.cg.joinArgs(argv, child)
	case child:
		argv = wrapArgs(argv)
	}
	return exec.Command(argv[0], argv[1:]...)
}

// sysProcAttr adds u's credentials to attr when its uid is its own: uid
// and gid, and no supplementary groups (the portal's must not leak into
// the desktop). bubblewrap, started as that uid, then makes the
// namespaces; a desktop of a portal that is not root runs as the portal.
func (u *DesktopUser) sysProcAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if u != nil && (u.own || (u.ns == nil && !u.bare)) {
		attr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: append([]uint32{}, u.Groups...)}
	}
	if u != nil && u.cg != nil && u.cg.v2 != "" {
		// Cloned straight into the desktop's cgroup (the desktop's uid may
		// not move itself there in v2); closed by closeCgroupFD.
		if fd, err := unix.Open(u.cg.v2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err == nil {
			attr.UseCgroupFD, attr.CgroupFD = true, fd
		}
	}
	return attr
}

// closeCgroupFD closes what sysProcAttr opened, once the process started.
func closeCgroupFD(attr *syscall.SysProcAttr) {
	if attr != nil && attr.UseCgroupFD {
		unix.Close(attr.CgroupFD)
	}
}
