package kube

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// This file is the pure half of GPU and host-device admission: what one VM
// asks for, what each node has left, and how many VMs fit. capacity_admit.go
// reads the inputs from the apiserver and turns a shortfall into an error.

// deviceDemand returns the host devices one VM of spec asks for, by the
// extended resource a node advertises for them (GPU and host device
// deviceName). Devices claimed through DRA (a claim request, no deviceName)
// are not node allocatable and are left out.
func deviceDemand(spec *kubevirtv1.VirtualMachineInstanceSpec) map[corev1.ResourceName]int64 {
	out := map[corev1.ResourceName]int64{}
	for _, g := range spec.Domain.Devices.GPUs {
		if g.DeviceName != "" {
			out[corev1.ResourceName(g.DeviceName)]++
		}
	}
	for _, h := range spec.Domain.Devices.HostDevices {
		if h.DeviceName != "" {
			out[corev1.ResourceName(h.DeviceName)]++
		}
	}
	return out
}

// placement is where a VM may go, from its template: the node selector and
// tolerations the scheduler applies to its launcher pod. Affinity rules are
// not evaluated.
type placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// resourceUse is one resource on one node.
type resourceUse struct {
	Name        corev1.ResourceName
	Allocatable int64
	Held        int64 // by VMIs scheduled to or running on the node
}

// Free returns what is left of the resource, never less than zero.
func (r resourceUse) Free() int64 { return max(r.Allocatable-r.Held, 0) }

// nodeFit is one node's share of an admission: its resources and how many
// more VMs it can take.
type nodeFit struct {
	Node      string
	Resources []resourceUse // the resources one VM asks for, sorted by name
	// Excluded says why no VM may go to the node at all (cordoned, selector,
	// taint), or is empty.
	Excluded string
	VMs      int64 // how many more VMs fit on the node
}

// fitDevices reports, per node, how many more VMs asking for perVM devices
// fit, after the devices held by the VMIs in vmis that are scheduled to or
// running on it. One VM takes all its devices from one node; VMs are alike,
// so a node's share is the least over the resources of free / per VM, and
// the sum over nodes is exact. Nodes come back sorted by name.
func fitDevices(perVM map[corev1.ResourceName]int64, place placement, nodes []corev1.Node, vmis []kubevirtv1.VirtualMachineInstance) []nodeFit {
	held := map[string]map[corev1.ResourceName]int64{}
	for i := range vmis {
		vmi := &vmis[i]
		if vmi.Status.NodeName == "" || !holdsDevices(vmi) {
			continue
		}
		h := held[vmi.Status.NodeName]
		if h == nil {
			h = map[corev1.ResourceName]int64{}
			held[vmi.Status.NodeName] = h
		}
		for r, n := range deviceDemand(&vmi.Spec) {
			h[r] += n
		}
	}
	names := slices.Sorted(maps.Keys(perVM))
	out := make([]nodeFit, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		f := nodeFit{Node: n.Name, Excluded: excluded(n, place)}
		f.VMs = -1
		for _, r := range names {
			q := n.Status.Allocatable[r]
			use := resourceUse{Name: r, Allocatable: q.Value(), Held: held[n.Name][r]}
			f.Resources = append(f.Resources, use)
			if k := use.Free() / perVM[r]; f.VMs < 0 || k < f.VMs {
				f.VMs = k
			}
		}
		if f.Excluded != "" || f.VMs < 0 {
			f.VMs = 0
		}
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b nodeFit) int { return strings.Compare(a.Node, b.Node) })
	return out
}

// holdsDevices reports whether vmi has its devices: KubeVirt's launcher pod
// got them once the VMI is scheduled, and keeps them while it runs.
func holdsDevices(vmi *kubevirtv1.VirtualMachineInstance) bool {
	return vmi.Status.Phase == kubevirtv1.Scheduled || vmi.Status.Phase == kubevirtv1.Running
}

// excluded says why the scheduler would put no VM of place on node, or "".
func excluded(node *corev1.Node, place placement) string {
	if node.Spec.Unschedulable {
		return "cordoned"
	}
	if !labels.SelectorFromSet(place.NodeSelector).Matches(labels.Set(node.Labels)) {
		return "not matched by the VM's nodeSelector"
	}
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		if !slices.ContainsFunc(place.Tolerations, func(tol corev1.Toleration) bool {
			return tol.ToleratesTaint(klog.Background(), t, false)
		}) {
			return fmt.Sprintf("taint %s=%s:%s not tolerated by the VM", t.Key, t.Value, t.Effect)
		}
	}
	return ""
}

// totalFit returns how many more VMs fit on all nodes together.
func totalFit(fits []nodeFit) int64 {
	var n int64
	for _, f := range fits {
		n += f.VMs
	}
	return n
}
