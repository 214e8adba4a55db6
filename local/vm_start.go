package local

import (
	"context"
	"fmt"
	"log/slog"
)

// A QEMU guest outside any backend: the local VM image booted as a vm
// pool's member is, for a platform's stand-in whose VMs are real QEMU
// guests (the KubeVirt stand-in's, internal/testcluster), with the
// display and monitor that platform gives its QEMU.

// vmMonitorSocket is the QMP socket's name in the guest's folder.
const vmMonitorSocket = "qmp.sock"

// VMSpec says what StartVM boots.
type VMSpec struct {
	Name string
	// Dir is the guest's folder: its sockets, record, password,
	// initramfs and QEMU's log.
	Dir   string
	Image VMImage
	// Heads is how many heads the guest's virtio-vga display has, each
	// with a VNC server of its own (HeadAddr); 0 is a local VM's 2.
	// KubeVirt's display has 1 (libvirt's max_outputs from its heads).
	Heads int
	// Monitor gives QEMU a QMP socket (MonitorAddr), as libvirt gives
	// every QEMU it runs.
	Monitor bool
	// Accel is what CORRAL_VDI_VM_ACCEL says: "" or auto (KVM where a
	// guest runs under it, else TCG: the host's verdict, which the local
	// backend shares), kvm or tcg.
	Accel string
	Log   *slog.Logger
}

// StartVM boots spec's guest as the local backend boots a vm pool's
// member, run by this process's user, and returns once QEMU listens (the
// guest then boots on its own). Stop ends it.
func StartVM(ctx context.Context, spec VMSpec) (*VM, error) {
	if spec.Heads < 0 || spec.Heads > vmHeads {
		return nil, fmt.Errorf("local: vm %s: %d heads; a display has 1 to %d", spec.Name, spec.Heads, vmHeads)
	}
	qemu, err := lookQEMU()
	if err != nil {
		return nil, err
	}
	log := spec.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	accel, err := newAccelerator(spec.Accel, "", accelFile(spec.Dir), qemu, log)
	if err != nil {
		return nil, err
	}
	return bootVM(ctx, vmBoot{name: spec.Name, dir: spec.Dir, img: spec.Image, accel: accel,
		heads: spec.Heads, monitor: spec.Monitor, log: log})
}

// monitorArgs returns QEMU's arguments for a QMP monitor on the Unix
// socket sock.
func monitorArgs(sock string) []string {
	return []string{"-qmp", "unix:" + sock + ",server=on,wait=off"}
}

// MonitorAddr returns the path of QEMU's QMP socket, or "" when the
// guest has none (a local backend's member).
func (v *VM) MonitorAddr() string { return v.rec.Monitor }
