package local

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Where a guest listens. Its display is a virtio-vga with vmHeads outputs
// (heads), each served by a VNC server of its own: the first is the
// console's, the others are the console's screen windows
// (docs/decisions/vm-second-head.md). The image's virtio-gpu driver
// (scripts/vm-image.sh) drives them; until it loads, the first head shows
// the VGA text console and the others QEMU's placeholder.

// vmHeads is how many heads a local VM's display has.
const vmHeads = 2

// vmEndpoints picks where the guest's VNC servers (one per head of its
// heads) and its serial line listen and returns them with QEMU's -vnc
// address of each head and its -serial argument. By default they are Unix sockets in the
// member's private folder, so only the portal's user can reach them
// (QEMU's VNC has no password here, and a serial line keeps a logged-in
// shell). tcp (CORRAL_VDI_VM_LISTEN=tcp) puts them on loopback TCP ports
// instead, the shape of a VM with a network address (the peer path tests
// use it: a loopback port in another network namespace is out of reach, a
// socket file is not).
func vmEndpoints(dir string, tcp bool, heads int) (rec vmRecord, vncArgs []string, serialArg string, err error) {
	if tcp {
		serial, err := freeLoopbackAddr()
		if err != nil {
			return rec, nil, "", err
		}
		rec.Serial = serial
		for range heads {
			port, err := freeVNCPort()
			if err != nil {
				return rec, nil, "", err
			}
			rec.addHead("127.0.0.1:" + strconv.Itoa(port))
			vncArgs = append(vncArgs, "127.0.0.1:"+strconv.Itoa(port-5900))
		}
		return rec, vncArgs, "tcp:" + serial + ",server=on,wait=off", nil
	}
	rec.Serial = filepath.Join(dir, vmSerialSocket)
	for n := range heads {
		rec.addHead(filepath.Join(dir, vmHeadSocket(n+1)))
	}
	for i, p := range append([]string{rec.Serial, rec.VNC}, rec.Heads...) {
		if len(p) > maxUnixSocketPath {
			return rec, nil, "", fmt.Errorf("socket path %q too long (> %d bytes): use a shorter data directory", p, maxUnixSocketPath)
		}
		os.Remove(p)
		if i > 0 {
			vncArgs = append(vncArgs, "unix:"+p)
		}
	}
	return rec, vncArgs, "unix:" + rec.Serial + ",server=on,wait=off", nil
}

// vmHeadSocket is the name of head n's VNC socket (n from 1).
func vmHeadSocket(n int) string {
	if n == 1 {
		return vmVNCSocket
	}
	return fmt.Sprintf("vnc%d.sock", n)
}

// addHead records the next head's VNC server.
func (r *vmRecord) addHead(addr string) {
	if r.VNC == "" {
		r.VNC = addr
	} else {
		r.Heads = append(r.Heads, addr)
	}
}

// vmDisplayArgs returns QEMU's arguments for a virtio-vga display with a
// head per VNC address in vncArgs (QEMU's -vnc form), each head served by
// its own VNC server.
func vmDisplayArgs(vncArgs []string) []string {
	args := []string{"-vga", "none", "-device", fmt.Sprintf("virtio-vga,id=video0,max_outputs=%d", len(vncArgs))}
	for i, a := range vncArgs {
		args = append(args, "-vnc", fmt.Sprintf("%s,id=vnc%d,display=video0,head=%d", a, i, i))
	}
	return args
}

// HeadAddr returns the address of the VNC server of the display's head n
// (from 1; head 1 is VNCAddr), or "" when the guest's display has no such
// head.
func (v *VM) HeadAddr(n int) string {
	switch {
	case n == 1:
		return v.rec.VNC
	case n >= 2 && n-2 < len(v.rec.Heads):
		return v.rec.Heads[n-2]
	}
	return ""
}

// Heads returns how many heads the guest's display has.
func (v *VM) Heads() int { return 1 + len(v.rec.Heads) }

// vmNetwork is the network of a VM endpoint address: Unix sockets are paths.
func vmNetwork(addr string) string {
	if strings.HasPrefix(addr, "/") {
		return "unix"
	}
	return "tcp"
}

// freeLoopbackAddr returns a loopback TCP address that was free a moment ago.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// freeVNCPort returns a free loopback port of 5900 or above, since QEMU
// takes a VNC display number, not a port.
func freeVNCPort() (int, error) {
	for range 50 {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return 0, err
		}
		_, port, _ := net.SplitHostPort(addr)
		if n, _ := strconv.Atoi(port); n >= 5900 && n < 5900+65000 {
			return n, nil
		}
	}
	return 0, errors.New("no free VNC port above 5900")
}
