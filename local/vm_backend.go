package local

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// vmDialTimeout bounds connecting to a guest's VNC server or serial line;
// both are on this host, so an answer is quick or never.
const vmDialTimeout = 2 * time.Second

// DemoVMPool is the name of the pool EnsureDemoVMPool makes.
const DemoVMPool = "demo-vm"

// EnsureDemoVMPool creates the ephemeral vm pool "demo-vm" of size QEMU
// members (demo-vm-1, ...) unless it exists. It checks first that QEMU and
// the VM image are there, so a missing piece is reported at start-up.
func (b *Backend) EnsureDemoVMPool(ctx context.Context, size int) error {
	if _, err := lookQEMU(); err != nil {
		return fmt.Errorf("local: vm pool: %w", err)
	}
	if _, err := FindVMImage(b.vmImage, b.vmImageCache); err != nil {
		return err
	}
	if _, err := b.db.LocalPool(ctx, DemoVMPool); err == nil {
		return nil
	} else if !errors.Is(err, vdi.ErrNotFound) {
		return err
	}
	p := store.LocalPool{Pool: vdi.Pool{Name: DemoVMPool, Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "tiny"}}
	for i := 1; i <= size; i++ {
		p.Members = append(p.Members, fmt.Sprintf("%s-%d", DemoVMPool, i))
	}
	b.log.Info("created demo vm pool", "pool", DemoVMPool, "size", size)
	return b.db.CreateLocalPool(ctx, p)
}

// isVMPool reports whether the named pool's members are QEMU guests.
func (b *Backend) isVMPool(ctx context.Context, pool string) bool {
	p, err := b.db.LocalPool(ctx, pool)
	return err == nil && p.Kind == vdi.KindVM
}

// vmBoot says where member name's guest lives and whom it runs as, like
// desktopSpec for a session desktop; the error is the sandbox's refusal.
func (b *Backend) vmBoot(name string) (vmBoot, error) {
	spec, err := b.desktopSpec(name)
	return vmBoot{name: name, dir: spec.Dir, state: spec.State, user: spec.User, accel: b.accel, listenTCP: b.vmListenTCP, log: b.log}, err
}

// startVM boots the member's guest and settles rt, like Start does for a
// session desktop.
func (b *Backend) startVM(ctx context.Context, ref vdi.Ref, rt *member) error {
	cfg, err := b.vmBoot(ref.Name)
	var v *VM
	if err == nil {
		cfg.img, err = FindVMImage(b.vmImage, b.vmImageCache)
	}
	if err == nil {
		v, err = bootVM(ctx, cfg)
	}
	return b.settle(ref, rt, v, err)
}

// adoptVM takes over a guest a previous portal left running; called from New.
func (b *Backend) adoptVM(name string) {
	cfg, err := b.vmBoot(name)
	var v *VM
	if err == nil {
		v, err = adoptVM(cfg)
	}
	if errors.Is(err, ErrNotRunning) {
		return
	} else if err != nil {
		b.log.Warn("could not adopt vm", "desktop", Namespace+"/"+name, "err", err)
		return
	}
	b.log.Info("adopted running vm", "desktop", Namespace+"/"+name, "serial", v.SerialAddr())
	rt := &member{power: vdi.PowerRunning, vm: v, ready: closed()}
	b.members[name] = rt
	go b.watch(name, rt, v)
}

// dialVM connects to the guest's VNC server or serial line.
func dialVM(ctx context.Context, ref vdi.Ref, v *VM, p vdi.Protocol) (net.Conn, error) {
	switch p {
	case vdi.ProtocolVNC:
		return dialVMAt(ctx, v, v.VNCAddr())
	case vdi.ProtocolSerial:
		return dialVMAt(ctx, v, v.SerialAddr())
	}
	return nil, vdi.Errorf(vdi.EInvalid, "Use VNC or the serial console for this VM.", "VM %s has no %s console.", ref, p)
}

var _ vdi.HeadDialer = (*Backend)(nil)

// DialHead connects to the VNC server of head n (from 1) of the member's
// VM display: a console's screen window shows head 2.
func (b *Backend) DialHead(ctx context.Context, ref vdi.Ref, n int) (net.Conn, error) {
	b.mu.Lock()
	var v *VM
	if rt := b.members[ref.Name]; rt != nil {
		v = rt.vm
	}
	b.mu.Unlock()
	if v == nil {
		return nil, vdi.Errorf(vdi.EUnavailable, "Start it, then connect again.", "Desktop %s is not a running VM.", ref)
	}
	addr := v.HeadAddr(n)
	if addr == "" {
		return nil, vdi.Errorf(vdi.EInvalid, "Use the screens the Size list offers.", "VM %s's display has %d heads, not a head %d.", ref, v.Heads(), n)
	}
	ctx, cancel := context.WithTimeout(ctx, vmDialTimeout)
	defer cancel()
	c, err := v.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	if cw, ok := c.(closeWriter); ok {
		return newHeadConn(cw), nil
	}
	return c, nil
}

// dialVMAt connects to one of the guest's consoles at addr.
func dialVMAt(ctx context.Context, v *VM, addr string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, vmDialTimeout)
	defer cancel()
	c, err := v.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &vmConn{Conn: c, v: v}, nil
}

// vmConn is a connection to a guest's console that also knows its sign-in.
type vmConn struct {
	net.Conn
	v *VM
}

// Credentials returns the guest's login and password.
func (c *vmConn) Credentials() (user, password string) { return VMUser, c.v.Password() }
