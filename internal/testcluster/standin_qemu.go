package testcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testvm"
	"github.com/corral-dev/corral-vdi-portal/local"
)

// TEST-ONLY: a VM whose template asks for a virtio video device
// (spec.template.spec.domain.devices.video.type: virtio) runs a real
// QEMU guest in place of the Xvnc desktop: the tiny local VM image
// (testvm.Image) booted by local.StartVM under the local VMs' accelerator
// choice, with the display KubeVirt 1.7's virt-launcher gives such a VM.
// Its converter.go asks libvirt for <video><model type='virtio'
// heads='1' vram='16384'/></video> and one <graphics type='vnc'> on the
// Unix socket virt-vnc, which virt-handler's vnc streams; libvirt gives
// QEMU those as one virtio-vga with max_outputs=1 and one -vnc
// unix:<socket> with no password, and keeps a QMP monitor on it (libvirt's
// tests/qemuxmlconfdata video-virtio-vga and graphics-vnc-socket).
// So here:
//
//   - vnc is QEMU's VNC server of that one head (one client, as
//     virt-handler keeps: standin_console.go);
//   - console is QEMU's serial line (virt-serial0), with the image's root
//     login on it (GuestLogin);
//   - vnc/screenshot is QEMU's screendump of the display in PNG, as
//     libvirt's virDomainScreenshot takes it (Screendump for tests);
//   - the guest has no network and no servers of its own: 5900 and 3389
//     at its IP refuse, so a portal reaches its display only through the
//     subresource.
//
// The machine is QEMU's default (i440fx) where KubeVirt's is q35; the
// display, its VNC server and the guest's driver are the same on both.

// standInQEMUBootWait bounds QEMU's start until its VNC server answers;
// a host whose KVM hangs costs a silent boot first (local's accelerator).
const standInQEMUBootWait = 2 * time.Minute

// wantsQEMU reports whether a VM's template asks for a virtio video
// device, whose guest the stand-in runs as a real QEMU.
func wantsQEMU(t *kubevirtv1.VirtualMachineInstanceTemplateSpec) bool {
	return t != nil && t.Spec.Domain.Devices.Video != nil && t.Spec.Domain.Devices.Video.Type == kubevirtv1.VirtIO
}

// startQEMUGuest boots a QEMU guest in dir with KubeVirt's display and
// waits until its VNC server answers. Nothing of the guest listens at its
// IP: the listeners close.
func startQEMUGuest(ctx context.Context, dir, name string, uid types.UID, vnc, rdp net.Listener) (*standInVMI, error) {
	ctx, cancel := context.WithTimeout(ctx, standInQEMUBootWait)
	defer cancel()
	g := &standInVMI{vmUID: uid, conns: map[net.Conn]struct{}{}, direct: map[net.Conn]net.Conn{}, silent: map[net.Conn]bool{}, viewers: map[string]chan struct{}{}}
	g.ip, g.lns, g.dir = vnc.Addr().(*net.TCPAddr).IP.String(), []net.Listener{vnc, rdp}, dir
	imgDir, err := testvm.Image()
	var img local.VMImage
	if err == nil {
		img, err = local.FindVMImage(imgDir, "")
	}
	if err != nil {
		g.stop()
		return nil, fmt.Errorf("the QEMU guest's image: %w", err)
	}
	// The accelerator is the host's remembered verdict (KVM where it works,
	// TCG where it is missing or hangs), as a local VM's with nothing forced.
	g.vm, err = local.StartVM(ctx, local.VMSpec{Name: name, Dir: dir, Image: img, Heads: 1, Monitor: true})
	if err != nil {
		g.stop()
		return nil, err
	}
	g.arrive(vnc, rdp)
	if err := waitRFB(ctx, "unix", g.vm.VNCAddr()); err != nil {
		g.stop()
		return nil, fmt.Errorf("the QEMU guest's display: %w", err)
	}
	return g, nil
}

// GuestLogin returns the root login of the serial console of the running
// QEMU guest of VMI namespace/name, which its user would know; empty for
// a desktop guest or none.
func (s *KubeVirtStandIn) GuestLogin(namespace, name string) (user, password string) {
	g := s.vmi(namespace, name)
	if g == nil || g.vm == nil {
		return "", ""
	}
	return local.VMUser, g.vm.Password()
}

// Screendump returns QEMU's own picture of the display of the running
// QEMU guest of VMI namespace/name (its screendump, as libvirt takes a
// screenshot), for a test to compare with what a console shows.
func (s *KubeVirtStandIn) Screendump(namespace, name string) (image.Image, error) {
	g := s.vmi(namespace, name)
	if g == nil || g.vm == nil {
		return nil, fmt.Errorf("no running QEMU guest of VMI %s/%s (a VM whose template asks for a virtio video device)", namespace, name)
	}
	b, err := g.screendump()
	if err != nil {
		return nil, err
	}
	return png.Decode(bytes.NewReader(b))
}

// screendump returns a PNG of the QEMU guest's display from its QMP
// monitor, one at a time (the monitor serves one client).
func (g *standInVMI) screendump() ([]byte, error) {
	g.qmpMu.Lock()
	defer g.qmpMu.Unlock()
	file := filepath.Join(g.dir, "screendump.png")
	defer os.Remove(file)
	if err := qmp(g.vm.MonitorAddr(), "screendump", map[string]string{"filename": file, "format": "png"}); err != nil {
		return nil, fmt.Errorf("QEMU's screendump: %w", err)
	}
	return os.ReadFile(file)
}

// qmp runs one command on the QMP monitor at sock and waits for its
// answer: nil for a return, its error's text otherwise.
func qmp(sock, command string, args any) error {
	conn, err := net.DialTimeout("unix", sock, 10*time.Second)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	dec, enc := json.NewDecoder(conn), json.NewEncoder(conn)
	// answer reads past the greeting and events to the next return or error.
	answer := func() error {
		for {
			var m struct {
				Return json.RawMessage
				Error  *struct{ Class, Desc string }
			}
			if err := dec.Decode(&m); err != nil {
				return err
			}
			if m.Error != nil {
				return errors.New(m.Error.Class + ": " + m.Error.Desc)
			}
			if m.Return != nil {
				return nil
			}
		}
	}
	if err := enc.Encode(map[string]any{"execute": "qmp_capabilities"}); err != nil {
		return err
	}
	if err := answer(); err != nil {
		return fmt.Errorf("qmp_capabilities: %w", err)
	}
	if err := enc.Encode(map[string]any{"execute": command, "arguments": args}); err != nil {
		return err
	}
	return answer()
}
