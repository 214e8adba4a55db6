package testcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TEST-ONLY: the stand-in's virt-launcher Pods. In KubeVirt every VMI runs
// in a virt-launcher Pod that the VMI controls, labelled
// kubevirt.io/created-by=<VMI UID>, whose IP the pod network (CNI) gave
// it: the address the platform vouches for, as opposed to what the guest
// agent reports in the VMI's status.interfaces. The stand-in makes one per
// running VMI, bound to its node, Running with the guest's IP, and deletes
// it with the VMI. The shared Kubelet stand-in leaves it alone (it is bound
// to another node).

// StandInNode is the node the stand-in's VMIs and launcher Pods run on.
const StandInNode = "kubevirt-standin"

// createLauncherPod makes the launcher Pod of vmi with ip as its Pod IP.
func (s *KubeVirtStandIn) createLauncherPod(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, ip string) error {
	yes := true
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: vmi.Namespace, GenerateName: "virt-launcher-" + vmi.Name + "-",
			Labels: map[string]string{"kubevirt.io": "virt-launcher", "kubevirt.io/created-by": string(vmi.UID), "vm.kubevirt.io/name": vmi.Name},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachineInstance",
				Name: vmi.Name, UID: vmi.UID, Controller: &yes, BlockOwnerDeletion: &yes}}},
		Spec: corev1.PodSpec{NodeName: StandInNode, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "compute", Image: "quay.io/kubevirt/virt-launcher:standin"}}},
	}
	if err := s.cl.Create(ctx, pod); err != nil {
		return fmt.Errorf("create the virt-launcher Pod: %w", err)
	}
	now := metav1.Now()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}, StartTime: &now,
		HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}}}
	if err := s.cl.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("status of the virt-launcher Pod: %w", err)
	}
	return nil
}

// deleteLauncherPods deletes the launcher Pods of the VMI namespace/name
// (any UID: one left over from a deleted VM goes too), at once, as a
// kubelet would once the guest is down.
func (s *KubeVirtStandIn) deleteLauncherPods(ctx context.Context, ns, name string) error {
	var pods corev1.PodList
	if err := s.cl.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"kubevirt.io": "virt-launcher", "vm.kubevirt.io/name": name}); err != nil {
		return err
	}
	zero := int64(0)
	for i := range pods.Items {
		if err := s.cl.Delete(ctx, &pods.Items[i], &client.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return nil
}

// GuestAgentReports makes the running VMI namespace/vm report ip first in
// status.interfaces with infoSource, as virt-handler writes what a guest
// agent says: root in the guest can make it say anything, another VM's IP
// included. The guest keeps its own IP and launcher Pod.
func (s *KubeVirtStandIn) GuestAgentReports(tb testing.TB, namespace, vm, ip, infoSource string) {
	tb.Helper()
	ctx := context.Background()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := s.cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: vm}, &vmi); err != nil {
		tb.Fatal(err)
	}
	ifaces := append([]kubevirtv1.VirtualMachineInstanceNetworkInterface{{Name: "default", InterfaceName: "eth0",
		IP: ip, IPs: []string{ip}, InfoSource: infoSource}}, vmi.Status.Interfaces...)
	if strings.Contains(infoSource, "domain") && len(ifaces) > 1 {
		// The agent's report replaces the domain's interface (matched by MAC).
		ifaces = append(ifaces[:1], ifaces[2:]...)
	}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"interfaces": ifaces}})
	if err := s.cl.Status().Patch(ctx, &vmi, client.RawPatch(types.MergePatchType, patch)); err != nil {
		tb.Fatal(err)
	}
}
