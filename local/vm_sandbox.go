package local

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
)

// A QEMU member runs as its member's uid, like a session desktop: its run
// folder is the uid's, the portal's record of it is not, and its sockets
// are dialled by inode.

// prepareVMDirs makes the state folder (the portal's) and a fresh run
// folder handed to the guest's user, so that nothing its user planted
// there (a symlink for a socket, say) is written through.
func prepareVMDirs(cfg vmBoot) error {
	if err := os.MkdirAll(cfg.stateDir(), 0o700); err != nil {
		return err
	}
	if cfg.user == nil {
		return os.MkdirAll(cfg.dir, 0o700)
	}
	if err := os.RemoveAll(cfg.dir); err != nil {
		return err
	}
	if err := os.Mkdir(cfg.dir, 0o700); err != nil {
		return err
	}
	if err := cfg.user.give(cfg.dir); err != nil {
		return err
	}
	if cfg.user.ns != nil { // QEMU's cwd is the (empty) home
		home := cfg.user.ns.home
		return errors.Join(os.MkdirAll(home, 0o700), cfg.user.give(home), cfg.user.freshTmp())
	}
	return nil
}

// dial connects to the guest's VNC server or serial line: a socket of the
// guest's user (never through a symlink), or a loopback port.
func (v *VM) dial(ctx context.Context, addr string) (net.Conn, error) {
	if vmNetwork(addr) == "unix" {
		return dialUnixAs(ctx, addr, v.user)
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// qemuUser is u with the group of /dev/kvm added, so that QEMU as the
// member's uid can still use KVM; nil stays nil. tcp (the guest's consoles
// on loopback ports, CORRAL_VDI_VM_LISTEN=tcp) keeps QEMU in the portal's
// network namespace, where the portal dials those ports; the guest itself
// still has no network (-nic none).
func qemuUser(u *DesktopUser, tcp bool) *DesktopUser {
	if u == nil {
		return nil
	}
	q := *u
	if u.ns != nil { // the device is bound in
		ns := *u.ns
		ns.devices = []string{"/dev/kvm"}
		ns.hostNet = tcp
		q.ns = &ns
	}
	if !u.own { // the portal's own groups
		return &q
	}
	var st syscall.Stat_t
	if err := syscall.Stat("/dev/kvm", &st); err == nil && st.Gid != 0 {
		q.Groups = []uint32{st.Gid}
	}
	return &q
}
