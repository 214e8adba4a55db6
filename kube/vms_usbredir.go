package kube

import (
	"context"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// DialUSB opens the usbredir subresource of the VMI named like the member
// ref through the apiserver (virt-api proxies it to virt-handler, which
// hands it to QEMU's usb-redir chardev of the VMI). KubeVirt only has such
// chardevs when the VM asks for them with
// spec.template.spec.domain.devices.clientPassthrough: {}, so a VMI
// without it is refused with how to add it. The caller has authorized
// ref; the path is always the apiserver's.
func (s *SubresourcePath) DialUSB(ctx context.Context, ref vdi.Ref) (net.Conn, string, error) {
	vmi, err := s.addrs.vmi(ctx, ref)
	if apierrors.IsNotFound(err) {
		return nil, "", vdi.Errorf(vdi.EUnavailable, "Start it, then attach the device again.", "VM %s is not running.", ref)
	} else if err != nil {
		return nil, "", fmt.Errorf("kube: VMI of %s: %w", ref, err)
	}
	if vmi.Spec.Domain.Devices.ClientPassthrough == nil {
		return nil, "", vdi.Errorf(vdi.EInvalid,
			"Ask an admin to add spec.template.spec.domain.devices.clientPassthrough: {} to the golden VM (and restart this one): "+
				"KubeVirt gives a VM USB redirection slots only then.",
			"VM %s cannot take USB devices: it has no clientPassthrough.", ref)
	}
	c, err := s.dial.open(ctx, ref, "usbredir")
	if err != nil {
		return nil, "", err
	}
	return c, PathAPIServer, nil
}
