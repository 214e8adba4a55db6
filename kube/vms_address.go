package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A VMI's status.interfaces are written by virt-handler from what the
// guest agent reports: root in the guest chooses them. The portal dials a
// guest only at an address the platform vouches for, one that the pod
// network (CNI, or Multus for secondary networks) gave the VMI's
// virt-launcher Pod: with masquerade binding the VMI reports the Pod's IP,
// with bridge binding the guest holds the Pod's IP. An address only the
// guest agent reports (another user's VM, a node, the apiserver) is never
// dialled, directly or through virt-api's portforward, which dials
// status.interfaces[0] itself.

// Labels and annotations KubeVirt and Multus put on virt-launcher Pods.
const (
	labelCreatedBy           = "kubevirt.io/created-by"             // the VMI's UID
	labelLauncher            = "kubevirt.io=virt-launcher"          // every virt-launcher Pod
	annotationNetworkStatus  = "k8s.v1.cni.cncf.io/network-status"  // Multus: the networks and their IPs
	annotationNetworkStatusL = "k8s.v1.cni.cncf.io/networks-status" // older Multus
)

// addresses finds the addresses of a VMI that its virt-launcher Pod
// vouches for.
type addresses struct {
	kv   rest.Interface // kubevirt.io/v1
	core corev1client.CoreV1Interface

	// The VMIs and virt-launcher Pods, once StartCaches ran (nil reads the
	// API server). What they do not have yet is read from the API server.
	vmis, launchers *watched
}

func newAddresses(cfg *rest.Config, kv rest.Interface) (*addresses, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &addresses{kv: kv, core: cs.CoreV1()}, nil
}

// dialVMI reads the VMI of ref for the direct console path: from the
// cache when it serves reads and has it with an address, else from the
// API server (a VMI that started a moment ago may not be in the cache
// yet, or not with its address). Waits read vmi: a VMI the cache still
// holds may be gone.
func (a *addresses) dialVMI(ctx context.Context, ref vdi.Ref) (*kubevirtv1.VirtualMachineInstance, error) {
	if st := a.vmis.store(ref.Namespace); st != nil {
		if o, ok, _ := st.GetByKey(ref.Namespace + "/" + ref.Name); ok {
			vmi := o.(*kubevirtv1.VirtualMachineInstance)
			if len(vmi.Status.Interfaces) > 0 && vmi.DeletionTimestamp == nil {
				return vmi, nil
			}
		}
	}
	return a.vmi(ctx, ref)
}

// vmi reads the VMI of ref from the API server.
func (a *addresses) vmi(ctx context.Context, ref vdi.Ref) (*kubevirtv1.VirtualMachineInstance, error) {
	var vmi kubevirtv1.VirtualMachineInstance
	if err := a.kv.Get().Namespace(ref.Namespace).Resource("virtualmachineinstances").Name(ref.Name).Do(ctx).Into(&vmi); err != nil {
		return nil, err
	}
	return &vmi, nil
}

// launcherPod returns the virt-launcher Pod that runs vmi now: controlled
// by the VMI, not being deleted, the newest (a migration has two). It
// reads the cache when it serves reads and has such a Pod, else the API
// server.
func (a *addresses) launcherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (*corev1.Pod, error) {
	if st := a.launchers.store(vmi.Namespace); st != nil {
		if cur := runningLauncher(vmi, cachedList[corev1.Pod](st, vmi.Namespace, string(vmi.UID))); cur != nil {
			return cur, nil
		}
	}
	pods, err := a.core.Pods(vmi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: labelCreatedBy + "=" + string(vmi.UID)})
	if err != nil {
		return nil, fmt.Errorf("kube: list the virt-launcher Pods of VMI %s/%s: %w", vmi.Namespace, vmi.Name, err)
	}
	return runningLauncher(vmi, pods.Items), nil
}

// runningLauncher returns the newest of pods that runs vmi now, or nil.
func runningLauncher(vmi *kubevirtv1.VirtualMachineInstance, pods []corev1.Pod) *corev1.Pod {
	var cur *corev1.Pod
	for i := range pods {
		p := &pods[i]
		if !metav1.IsControlledBy(p, vmi) || p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if vmi.Status.NodeName != "" && p.Spec.NodeName != vmi.Status.NodeName {
			continue
		}
		if cur == nil || cur.CreationTimestamp.Before(&p.CreationTimestamp) {
			cur = p
		}
	}
	return cur
}

// podIPs returns the IPs pod's networks gave it: status.podIPs and those
// Multus lists in its network-status annotation.
func podIPs(pod *corev1.Pod) []string {
	var ips []string
	add := func(ip string) {
		if net.ParseIP(ip) != nil && !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	add(pod.Status.PodIP)
	for _, ip := range pod.Status.PodIPs {
		add(ip.IP)
	}
	for _, key := range []string{annotationNetworkStatus, annotationNetworkStatusL} {
		var nets []struct {
			IPs []string `json:"ips"`
		}
		if json.Unmarshal([]byte(pod.Annotations[key]), &nets) == nil {
			for _, n := range nets {
				for _, ip := range n.IPs {
					add(ip)
				}
			}
		}
	}
	return ips
}

// reported returns the IPs iface reports, ipAddress first.
func reported(iface kubevirtv1.VirtualMachineInstanceNetworkInterface) []string {
	ips := []string{}
	if iface.IP != "" {
		ips = append(ips, iface.IP)
	}
	for _, ip := range iface.IPs {
		if ip != "" && !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	return ips
}

// direct returns the first IP vmi reports that its virt-launcher Pod
// vouches for, or a plain error saying why there is none (no IP yet, or
// only addresses the pod network never gave it).
func (a *addresses) direct(ctx context.Context, ref vdi.Ref, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	var all []string
	for _, iface := range vmi.Status.Interfaces {
		all = append(all, reported(iface)...)
	}
	if len(all) == 0 {
		return "", fmt.Errorf("kube: VirtualMachineInstance %s (phase %q) reports no IP address in status.interfaces: "+
			"the guest has no pod network, or its guest agent has not reported one yet", ref, vmi.Status.Phase)
	}
	vouched, pod, err := a.vouched(ctx, vmi)
	if err != nil {
		return "", err
	}
	for _, ip := range all {
		if slices.Contains(vouched, ip) {
			return ip, nil
		}
	}
	return "", fmt.Errorf("kube: VirtualMachineInstance %s reports %v, none of them an address its virt-launcher Pod %s has from the pod network (%v): "+
		"the portal does not dial addresses only the guest reports", ref, all, pod, vouched)
}

// vouched returns the launcher Pod's IPs and its name ("none" without one).
func (a *addresses) vouched(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) ([]string, string, error) {
	pod, err := a.launcherPod(ctx, vmi)
	if err != nil {
		return nil, "", err
	}
	if pod == nil {
		return nil, "(none running)", nil
	}
	return podIPs(pod), pod.Name, nil
}

// portForwardTarget checks the address virt-api's portforward would dial
// for vmi: status.interfaces[0].ipAddress, which must be set (virt-api
// dials ":port" on itself otherwise) and vouched for by the launcher Pod.
func (a *addresses) portForwardTarget(ctx context.Context, ref vdi.Ref) error {
	vmi, err := a.vmi(ctx, ref)
	if err != nil {
		return fmt.Errorf("kube: portforward to VMI %s: %w", ref, err)
	}
	if len(vmi.Status.Interfaces) == 0 || vmi.Status.Interfaces[0].IP == "" {
		return fmt.Errorf("kube: VMI %s reports no IP in status.interfaces[0], the address virt-api's portforward dials: "+
			"no port of the guest can be reached through the apiserver until it has one", ref)
	}
	ip := vmi.Status.Interfaces[0].IP
	vouched, pod, err := a.vouched(ctx, vmi)
	if err != nil {
		return err
	}
	if !slices.Contains(vouched, ip) {
		return fmt.Errorf("kube: VMI %s reports %s first in status.interfaces, not an address its virt-launcher Pod %s has from the pod network (%v): "+
			"virt-api's portforward would dial it, so the portal does not ask", ref, ip, pod, vouched)
	}
	return nil
}
