package kube

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

const (
	a10   = corev1.ResourceName("nvidia.com/GA102GL_A10")
	a10q  = corev1.ResourceName("nvidia.com/NVIDIA_A10-12Q")
	nvme  = corev1.ResourceName("intel.com/nvme")
	other = corev1.ResourceName("example.com/other")
)

func node(name string, alloc map[corev1.ResourceName]int64) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}}}
	n.Status.Allocatable = corev1.ResourceList{}
	for r, q := range alloc {
		n.Status.Allocatable[r] = *resource.NewQuantity(q, resource.DecimalSI)
	}
	return n
}

func vmiOn(nodeName string, phase kubevirtv1.VirtualMachineInstancePhase, gpus ...corev1.ResourceName) kubevirtv1.VirtualMachineInstance {
	var v kubevirtv1.VirtualMachineInstance
	for i, g := range gpus {
		v.Spec.Domain.Devices.GPUs = append(v.Spec.Domain.Devices.GPUs, kubevirtv1.GPU{Name: fmt.Sprint("gpu", i), DeviceName: string(g)})
	}
	v.Status.NodeName, v.Status.Phase = nodeName, phase
	return v
}

// render shows a breakdown as "node:room[excluded]" joined by spaces.
func render(fits []nodeFit) string {
	var out []string
	for _, f := range fits {
		s := fmt.Sprintf("%s:%d", f.Node, f.VMs)
		if f.Excluded != "" {
			s += "[" + f.Excluded + "]"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestDeviceDemand(t *testing.T) {
	var spec kubevirtv1.VirtualMachineInstanceSpec
	spec.Domain.Devices.GPUs = []kubevirtv1.GPU{{Name: "a", DeviceName: string(a10)}, {Name: "b", DeviceName: string(a10)},
		{Name: "dra", ClaimRequest: &kubevirtv1.ClaimRequest{ClaimName: "c", RequestName: "r"}}}
	spec.Domain.Devices.HostDevices = []kubevirtv1.HostDevice{{Name: "disk", DeviceName: string(nvme)}}
	got := deviceDemand(&spec)
	if len(got) != 2 || got[a10] != 2 || got[nvme] != 1 {
		t.Errorf("deviceDemand = %v; want 2 × %s and 1 × %s, the DRA claim left out", got, a10, nvme)
	}
}

func TestFitDevices(t *testing.T) {
	tainted := node("tainted", map[corev1.ResourceName]int64{a10: 4})
	tainted.Spec.Taints = []corev1.Taint{{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}}
	cordoned := node("cordoned", map[corev1.ResourceName]int64{a10: 4})
	cordoned.Spec.Unschedulable = true
	for _, tc := range []struct {
		name  string
		perVM map[corev1.ResourceName]int64
		place placement
		nodes []corev1.Node
		vmis  []kubevirtv1.VirtualMachineInstance
		want  string
		total int64
	}{
		{
			name:  "exclusive passthrough, one VM per device",
			perVM: map[corev1.ResourceName]int64{a10: 1},
			nodes: []corev1.Node{node("b", map[corev1.ResourceName]int64{a10: 2}), node("a", map[corev1.ResourceName]int64{a10: 1}), node("cpu", nil)},
			want:  "a:1 b:2 cpu:0", total: 3,
		},
		{
			name:  "running and scheduled VMIs hold theirs; pending and stopped ones do not",
			perVM: map[corev1.ResourceName]int64{a10: 1},
			nodes: []corev1.Node{node("a", map[corev1.ResourceName]int64{a10: 4})},
			vmis: []kubevirtv1.VirtualMachineInstance{vmiOn("a", kubevirtv1.Running, a10), vmiOn("a", kubevirtv1.Scheduled, a10, a10),
				vmiOn("", kubevirtv1.Pending, a10), vmiOn("a", kubevirtv1.Succeeded, a10), vmiOn("b", kubevirtv1.Running, a10)},
			want: "a:1", total: 1,
		},
		{
			name:  "mediated slices are their own resource",
			perVM: map[corev1.ResourceName]int64{a10q: 1},
			nodes: []corev1.Node{node("a", map[corev1.ResourceName]int64{a10: 1, a10q: 2})},
			vmis:  []kubevirtv1.VirtualMachineInstance{vmiOn("a", kubevirtv1.Running, a10)},
			want:  "a:2", total: 2,
		},
		{
			name:  "per-node fit: 2 free in all, but no node has the 2 one VM needs",
			perVM: map[corev1.ResourceName]int64{a10: 2},
			nodes: []corev1.Node{node("a", map[corev1.ResourceName]int64{a10: 1}), node("b", map[corev1.ResourceName]int64{a10: 1})},
			want:  "a:0 b:0", total: 0,
		},
		{
			name:  "the scarcest resource bounds a node",
			perVM: map[corev1.ResourceName]int64{a10: 1, nvme: 2},
			nodes: []corev1.Node{node("a", map[corev1.ResourceName]int64{a10: 4, nvme: 5}), node("b", map[corev1.ResourceName]int64{a10: 4})},
			want:  "a:2 b:0", total: 2,
		},
		{
			name:  "held beyond allocatable is no room, not negative room",
			perVM: map[corev1.ResourceName]int64{a10: 1},
			nodes: []corev1.Node{node("a", map[corev1.ResourceName]int64{a10: 1}), node("b", map[corev1.ResourceName]int64{a10: 1})},
			vmis:  []kubevirtv1.VirtualMachineInstance{vmiOn("a", kubevirtv1.Running, a10, a10)},
			want:  "a:0 b:1", total: 1,
		},
		{
			name:  "cordoned, untolerated taint and nodeSelector exclude",
			perVM: map[corev1.ResourceName]int64{a10: 1},
			place: placement{NodeSelector: map[string]string{"gpu": "yes"}},
			nodes: []corev1.Node{tainted, cordoned, node("plain", map[corev1.ResourceName]int64{a10: 4})},
			want:  "cordoned:0[cordoned] plain:0[not matched by the VM's nodeSelector] tainted:0[not matched by the VM's nodeSelector]",
		},
		{
			name:  "a toleration lets the VM onto a tainted node",
			perVM: map[corev1.ResourceName]int64{a10: 1},
			place: placement{Tolerations: []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}},
			nodes: []corev1.Node{tainted},
			want:  "tainted:4", total: 4,
		},
		{
			name:  "taint not tolerated",
			perVM: map[corev1.ResourceName]int64{a10: 1},
			place: placement{Tolerations: []corev1.Toleration{{Key: string(other), Operator: corev1.TolerationOpExists}}},
			nodes: []corev1.Node{tainted},
			want:  "tainted:0[taint nvidia.com/gpu=:NoSchedule not tolerated by the VM]",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fits := fitDevices(tc.perVM, tc.place, tc.nodes, tc.vmis)
			if got := render(fits); got != tc.want {
				t.Errorf("fitDevices = %s; want %s", got, tc.want)
			}
			if got := totalFit(fits); got != tc.total {
				t.Errorf("totalFit = %d; want %d", got, tc.total)
			}
		})
	}
}
