package local

import (
	"os/exec"
	"syscall"
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
	argv := append(u.Limits.prlimitArgs(), path)
	argv = append(argv, args...)
	if u.ns != nil {
		for i := range argv {
			argv[i] = u.ns.inside(argv[i])
		}
		return exec.Command(u.ns.bwrap, append(append(u.ns.args(terminal), u.prlimit), argv...)...)
	}
	return exec.Command(u.prlimit, argv...)
}

// sysProcAttr adds u's credentials to attr: uid and gid, and no
// supplementary groups (the portal's must not leak into the desktop); and
// with NoNetwork a network namespace of its own, made while the child is
// still root, before it takes u's uid. A namespaced u runs as the portal.
func (u *DesktopUser) sysProcAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if u != nil && u.ns == nil { // bubblewrap makes a namespaced u's namespaces
		attr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: append([]uint32{}, u.Groups...)}
		if u.NoNetwork {
			attr.Unshareflags |= syscall.CLONE_NEWNET
		}
	}
	return attr
}
