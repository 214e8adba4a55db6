package local

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// USB redirection to QEMU members: each guest gets an xHCI controller and
// a usb-redir device whose chardev is a Unix socket in the member's
// folder. QEMU is the usbredir "guest" side: it sends its usb_redir_hello
// as soon as a client connects, and the client (usbredirect on the user's
// machine, through the portal's /ws/usbredir) is the "host" side that owns
// the device. Nothing is attached until a client connects.

// vmUSBSocket is the usb-redir chardev's socket in a member's folder.
const vmUSBSocket = "usbredir.sock"

// usbArgs returns QEMU's arguments for a usb-redir device on the socket
// in dir. One chardev: one device at a time, as the portal allows.
func usbArgs(dir string) []string {
	sock := filepath.Join(dir, vmUSBSocket)
	os.Remove(sock)
	return []string{
		"-device", "qemu-xhci,id=xhci",
		"-chardev", "socket,id=usbredir0,path=" + sock + ",server=on,wait=off",
		"-device", "usb-redir,chardev=usbredir0,id=usbredirdev0,bus=xhci.0",
	}
}

// USBAddr returns the guest's usb-redir socket.
func (v *VM) USBAddr() string { return filepath.Join(v.dir, vmUSBSocket) }

// DialUSB connects to the usb-redir chardev of QEMU member ref; session
// desktops have no USB. The path is always direct.
func (b *Backend) DialUSB(ctx context.Context, ref vdi.Ref) (net.Conn, string, error) {
	b.mu.Lock()
	rt := b.members[ref.Name]
	b.mu.Unlock()
	switch {
	case rt != nil && rt.desktop != nil:
		return nil, "", vdi.Errorf(vdi.EInvalid, "Use a desktop of a vm pool for USB devices.",
			"Not supported: USB needs a KubeVirt or QEMU VM, and %s is a session desktop.", ref)
	case rt == nil || rt.vm == nil:
		return nil, "", vdi.Errorf(vdi.EUnavailable, "Start it, then attach the device again.", "Desktop %s is not running.", ref)
	}
	ctx, cancel := context.WithTimeout(ctx, vmDialTimeout)
	defer cancel()
	c, err := rt.vm.dial(ctx, rt.vm.USBAddr()) // a socket of the guest's uid, never through a symlink
	if errors.Is(err, os.ErrNotExist) {
		return nil, "", vdi.Errorf(vdi.EUnavailable, "Stop and start the desktop: it was started before USB redirection was set up.",
			"VM %s has no USB redirection endpoint.", ref)
	} else if err != nil {
		return nil, "", err
	}
	return c, "direct", nil
}
