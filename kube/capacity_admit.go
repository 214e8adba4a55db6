package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// deviceClass says how KubeVirt provides a host-device resource, as its
// KubeVirt CR's spec.configuration.permittedHostDevices declares it.
type deviceClass struct {
	// Kind is "pci" (a whole physical device, exclusive to one VM),
	// "mediated" (a vGPU slice of a physical GPU) or "usb"; empty when the
	// KubeVirt CR does not permit the resource or could not be read.
	Kind string
	// External reports an external device plugin (externalResourceProvider)
	// advertises and allocates the resource, not KubeVirt's own.
	External bool
}

// String describes the class for an admin.
func (c deviceClass) String() string {
	var s string
	switch c.Kind {
	case "pci":
		s = "PCI passthrough, one whole device per VM"
	case "mediated":
		s = "mediated device, a vGPU slice per VM"
	case "usb":
		s = "USB passthrough"
	default:
		return "kind unknown"
	}
	if c.External {
		s += ", from an external device plugin"
	}
	return s
}

// deviceClasses maps each resource the KubeVirt CRs permit to its class.
// ok is false when nothing is known: no KubeVirt CR declares
// permittedHostDevices (KubeVirt then checks no device against it), or the
// portal may not read the CRs (kubevirts.kubevirt.io list).
func (v *VMs) deviceClasses(ctx context.Context) (classes map[corev1.ResourceName]deviceClass, ok bool, err error) {
	var kvs kubevirtv1.KubeVirtList
	err = v.rest.Get().Resource("kubevirts").Do(ctx).Into(&kvs)
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, fmt.Errorf("kube: list KubeVirt CRs: %w", err)
	}
	classes = map[corev1.ResourceName]deviceClass{}
	for _, kv := range kvs.Items {
		p := kv.Spec.Configuration.PermittedHostDevices
		if p == nil {
			continue
		}
		ok = true
		for _, d := range p.PciHostDevices {
			classes[corev1.ResourceName(d.ResourceName)] = deviceClass{"pci", d.ExternalResourceProvider}
		}
		for _, d := range p.MediatedDevices {
			classes[corev1.ResourceName(d.ResourceName)] = deviceClass{"mediated", d.ExternalResourceProvider}
		}
		for _, d := range p.USB {
			classes[corev1.ResourceName(d.ResourceName)] = deviceClass{"usb", d.ExternalResourceProvider}
		}
	}
	return classes, ok, nil
}

// admitDevices refuses, before anything is cloned, a pool whose members
// could not all run at once for want of the host devices (GPUs, host
// devices) golden asks for, in its template and its instancetype. The pool in namespace will have the members
// named in members (existing ones) plus added new ones; members with a
// scheduled or running VMI already hold their devices, every other member
// needs a node with room for one VM's devices. A golden VM without devices
// passes without a look at the nodes.
//
// It also refuses (EInvalid) a device the KubeVirt CR does not permit,
// since no VM asking for it would start.
func (v *VMs) admitDevices(ctx context.Context, pool vdi.Ref, golden *kubevirtv1.VirtualMachine, members []string, added int) error {
	spec := &kubevirtv1.VirtualMachineInstanceSpec{}
	if golden.Spec.Template != nil {
		spec = &golden.Spec.Template.Spec
	}
	perVM := deviceDemand(spec)
	fromType, err := v.instancetypeDemand(ctx, golden)
	if err != nil {
		return err
	}
	for r, n := range fromType {
		perVM[r] += n
	}
	if len(perVM) == 0 {
		return nil
	}
	resources := slices.Sorted(maps.Keys(perVM))
	classes, known, err := v.deviceClasses(ctx)
	if err != nil {
		return err
	}
	if known {
		for _, r := range resources {
			if _, ok := classes[r]; !ok {
				return vdi.Errorf(vdi.EInvalid,
					"Add it to spec.configuration.permittedHostDevices (pciHostDevices or mediatedDevices) of the KubeVirt CR, or clone from a golden VM without it.",
					"Golden VM %s/%s asks for host device %s, which KubeVirt does not permit, so no member could start.",
					golden.Namespace, golden.Name, r)
			}
		}
	}
	var nodes corev1.NodeList
	raw, err := v.rest.Get().AbsPath("/api/v1/nodes").Do(ctx).Raw()
	if err == nil {
		err = json.Unmarshal(raw, &nodes)
	}
	if err != nil {
		return capacityReadError(pool, "nodes", err)
	}
	vmis, whole, err := v.deviceHolders(ctx, pool)
	if err != nil {
		return err
	}
	holding := 0
	for _, vmi := range vmis {
		if vmi.Namespace == pool.Namespace && slices.Contains(members, vmi.Name) && vmi.Status.NodeName != "" && holdsDevices(&vmi) {
			holding++
		}
	}
	want := int64(len(members) - holding + added)
	fits := fitDevices(perVM, placement{NodeSelector: spec.NodeSelector, Tolerations: spec.Tolerations}, nodes.Items, vmis)
	room := totalFit(fits)
	if room >= want {
		return nil
	}

	var msg strings.Builder
	if want == 1 {
		fmt.Fprintf(&msg, "Pool %s: 1 VM must be able to run", pool)
	} else {
		fmt.Fprintf(&msg, "Pool %s: %d VMs must be able to run at once", pool, want)
	}
	if len(members) > 0 {
		fmt.Fprintf(&msg, " (%d new and %d stopped members)", added, len(members)-holding)
	}
	msg.WriteString(", each on one node with ")
	for i, r := range resources {
		if i > 0 {
			msg.WriteString(" and ")
		}
		c := classes[r]
		if !known {
			c = deviceClass{}
		}
		fmt.Fprintf(&msg, "%d × %s (%s)", perVM[r], r, c)
	}
	fmt.Fprintf(&msg, " as golden VM %s asks; the nodes have room for %d.", golden.Name, room)
	if !whole {
		fmt.Fprintf(&msg, " (Only VMs in namespace %s are counted: the portal may not read the others, which may hold more.)", pool.Namespace)
	}
	none := 0
	for _, f := range fits {
		if !slices.ContainsFunc(f.Resources, func(r resourceUse) bool { return r.Allocatable > 0 }) {
			none++
			continue
		}
		fmt.Fprintf(&msg, " Node %s:", f.Node)
		for i, r := range f.Resources {
			if i > 0 {
				msg.WriteString(";")
			}
			fmt.Fprintf(&msg, " %s allocatable %d, held %d, free %d", r.Name, r.Allocatable, r.Held, r.Free())
		}
		if f.Excluded != "" {
			fmt.Fprintf(&msg, " (%s)", f.Excluded)
		}
		fmt.Fprintf(&msg, ", room for %d.", f.VMs)
	}
	if none == len(fits) {
		msg.WriteString(" No node offers them.")
	} else if none > 0 {
		fmt.Fprintf(&msg, " %d other nodes offer none of them.", none)
	}
	hint := fmt.Sprintf("Pick a size of at most %d, stop desktops or VMs that hold these devices, or add nodes that offer them; then try again. Nothing was cloned.", int64(holding)+room)
	return vdi.Errorf(vdi.EConflict, hint, "%s", msg.String())
}

// deviceHolders lists the VMIs that may hold devices: cluster-wide where
// the portal may (deploy/rbac.yaml), else, in the namespaced install, the
// pool's own namespace (whole is false). Devices held by VMs the portal
// cannot see only lower the room it counts, so a refusal on what it sees
// stands; an admission may still meet a node that is full, where the
// member's VMI stays unschedulable and says so (docs/operating.md).
func (v *VMs) deviceHolders(ctx context.Context, pool vdi.Ref) (vmis []kubevirtv1.VirtualMachineInstance, whole bool, err error) {
	var list kubevirtv1.VirtualMachineInstanceList
	err = v.rest.Get().Resource("virtualmachineinstances").Do(ctx).Into(&list)
	if err == nil {
		return list.Items, true, nil
	}
	if !apierrors.IsForbidden(err) {
		return nil, false, capacityReadError(pool, "virtualmachineinstances", err)
	}
	if err := v.rest.Get().Namespace(pool.Namespace).Resource("virtualmachineinstances").Do(ctx).Into(&list); err != nil {
		return nil, false, capacityReadError(pool, "virtualmachineinstances", err)
	}
	return list.Items, false, nil
}

// capacityReadError wraps a failure to list resource (cluster-wide) while
// admitting pool; a refusal by RBAC says which grant the portal lacks.
func capacityReadError(pool vdi.Ref, resource string, err error) error {
	err = fmt.Errorf("kube: list %s for the devices of pool %s: %w", resource, pool, err)
	if apierrors.IsForbidden(err) {
		return &vdi.Error{Code: vdi.EUnavailable, Err: err,
			Msg:  fmt.Sprintf("The portal may not list %s, so it cannot check that pool %s's GPUs and host devices fit.", resource, pool),
			Hint: "Grant its ServiceAccount list on " + resource + " cluster-wide, as deploy/rbac.yaml does, or clone from a golden VM without devices."}
	}
	return err
}
