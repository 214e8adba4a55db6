package kube

import (
	"context"
	"fmt"
	"net"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The ports the guest's own servers listen on, reached at the VMI's IP.
const (
	PortRDP = 3389
	PortVNC = 5900
)

// Dial is the direct path to a running member's console: TCP to its VMI's
// IP, port 3389 for RDP and 5900 for VNC, the guest's own servers. The IP
// is the first the VMI reports in status.interfaces that its virt-launcher
// Pod has from the pod network (see vms_address.go): never one only the
// guest agent reports. The serial console has no direct path.
//
// A member that is gone, in no pool or not running is a *vdi.Error no other
// path can mend; a VMI without an IP, or nothing answering, is a plain
// error, after which the caller tries the apiserver (SubresourcePath).
func (v *VMs) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	var port int
	switch p {
	case vdi.ProtocolRDP:
		port = PortRDP
	case vdi.ProtocolVNC:
		port = PortVNC
	case vdi.ProtocolSerial:
		return nil, fmt.Errorf("kube: the serial console of %s has no direct path, only the apiserver's console subresource", ref)
	default:
		return nil, vdi.Errorf(vdi.EInvalid, "VM desktops offer rdp, vnc and serial.", "VM %s has no %s console.", ref, p)
	}
	ip, place, err := v.vmiIP(ctx, ref)
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort(ip, strconv.Itoa(port))
	conn, err := directDialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("kube: dial the %s server of %s at its VMI's IP %s: %w (a network policy or the cluster network may keep this portal out)", p, ref, addr, err)
	}
	return v.addrs.watchMoves(ref, place, conn), nil
}

// vmiIP returns the member's VMI's first IP that its launcher Pod vouches
// for, and where the VMI runs. With no VMI it tells a stopped or missing
// member (final) from one still starting.
func (v *VMs) vmiIP(ctx context.Context, ref vdi.Ref) (string, vmiPlace, error) {
	vmi, err := v.addrs.dialVMI(ctx, ref)
	if apierrors.IsNotFound(err) {
		m, merr := v.Member(ctx, ref)
		if merr != nil {
			return "", vmiPlace{}, merr
		}
		if m.Power != vdi.PowerRunning {
			return "", vmiPlace{}, vdi.Errorf(vdi.EUnavailable, "Start it from the desktop page, then connect again.", "Desktop %s is %s.", ref, m.Power)
		}
		return "", vmiPlace{}, fmt.Errorf("kube: VM %s is running but has no VirtualMachineInstance (yet); reconnect in a moment", ref)
	} else if err != nil {
		return "", vmiPlace{}, fmt.Errorf("kube: get VirtualMachineInstance %s: %w", ref, err)
	}
	ip, err := v.addrs.direct(ctx, ref, vmi)
	if err != nil {
		return "", vmiPlace{}, err
	}
	return ip, placeOf(vmi, ip), nil
}
