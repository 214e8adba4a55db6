package local

import (
	"os/exec"
	"syscall"
)

// command returns the command that runs path with args as u: through
// prlimit, which sets u's limits on itself and execs path, keeping the PID,
// the open files and the environment. A nil u runs path directly.
func (u *DesktopUser) command(path string, args ...string) *exec.Cmd {
	if u == nil {
		return exec.Command(path, args...)
	}
	argv := append(u.Limits.prlimitArgs(), path)
	return exec.Command(u.prlimit, append(argv, args...)...)
}

// sysProcAttr adds u's credentials to attr: uid and gid, and no
// supplementary groups (the portal's must not leak into the desktop); and
// with NoNetwork a network namespace of its own, made while the child is
// still root, before it takes u's uid.
func (u *DesktopUser) sysProcAttr(attr *syscall.SysProcAttr) *syscall.SysProcAttr {
	if u != nil {
		attr.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: append([]uint32{}, u.Groups...)}
		if u.NoNetwork {
			attr.Unshareflags |= syscall.CLONE_NEWNET
		}
	}
	return attr
}
