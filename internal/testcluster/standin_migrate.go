package testcluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Migrate plays a live migration of VM namespace/name's running VMI to
// completion, in the order KubeVirt's migration controller and the two
// virt-handlers write it (node_migration.go plays the same steps against
// KubeVirt's own controllers): the VM reads Migrating and the VMI's
// migrationState starts; a target virt-launcher Pod runs at a new IP; the
// guest leaves its old IP, where its direct connections go silent with
// no FIN, and answers at the new one; the source Pod completes; the VMI
// reports the new IP and the migration completed, and the VM reads
// Running again. It returns the old and the new IP.
func (s *KubeVirtStandIn) Migrate(tb testing.TB, namespace, name string) (from, to string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	g := s.vmi(namespace, name)
	if g == nil {
		tb.Fatalf("migrate %s/%s: no running VMI", namespace, name)
	}
	from = g.address()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := s.cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &vmi); err != nil {
		tb.Fatalf("migrate %s/%s: %v", namespace, name, err)
	}
	uid := types.UID(fmt.Sprintf("standin-migration-%d", time.Now().UnixNano()))
	s.setVMStatus(ctx, namespace, name, kubevirtv1.VirtualMachineStatusMigrating, true, "")
	s.updateVMI(tb, ctx, &vmi, func(v *kubevirtv1.VirtualMachineInstance) {
		now := metav1.Now()
		v.Status.MigrationState = &kubevirtv1.VirtualMachineInstanceMigrationState{MigrationUID: uid,
			SourceNode: StandInNode, TargetNode: StandInNode, StartTimestamp: &now, Mode: kubevirtv1.MigrationPreCopy}
	})

	vnc, rdp, err := listenGuestIP()
	if err != nil {
		tb.Fatalf("migrate %s/%s: %v", namespace, name, err)
	}
	to = vnc.Addr().(*net.TCPAddr).IP.String()
	if err := s.createLauncherPod(ctx, &vmi, to); err != nil {
		tb.Fatalf("migrate %s/%s: the target's %v", namespace, name, err)
	}
	g.leave()
	g.arrive(vnc, rdp)
	s.completeLauncherPods(tb, ctx, &vmi, from)

	s.mu.Lock()
	withoutIP := s.noIPs[namespace+"/"+name]
	s.mu.Unlock()
	s.updateVMI(tb, ctx, &vmi, func(v *kubevirtv1.VirtualMachineInstance) {
		now := metav1.Now()
		m := v.Status.MigrationState
		m.TargetNodeDomainDetected, m.TargetNodeDomainReadyTimestamp = true, &now
		m.EndTimestamp, m.Completed = &now, true
		if !withoutIP && len(v.Status.Interfaces) > 0 {
			v.Status.Interfaces[0].IP, v.Status.Interfaces[0].IPs = to, []string{to}
		}
	})
	s.setVMStatus(ctx, namespace, name, kubevirtv1.VirtualMachineStatusRunning, true, "")
	return from, to
}

// updateVMI applies change to the newest vmi's status, again on a conflict.
func (s *KubeVirtStandIn) updateVMI(tb testing.TB, ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstance)) {
	tb.Helper()
	for {
		var cur kubevirtv1.VirtualMachineInstance
		err := s.cl.Get(ctx, client.ObjectKeyFromObject(vmi), &cur)
		if err == nil {
			change(&cur)
			err = s.cl.Status().Update(ctx, &cur)
		}
		if err == nil {
			*vmi = cur
			return
		}
		if !apierrors.IsConflict(err) {
			tb.Fatalf("VMI %s/%s's status: %v", vmi.Namespace, vmi.Name, err)
		}
	}
}

// completeLauncherPods marks vmi's virt-launcher Pods at ip Succeeded, as
// the source's kubelet does once its domain has migrated.
func (s *KubeVirtStandIn) completeLauncherPods(tb testing.TB, ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, ip string) {
	tb.Helper()
	var pods corev1.PodList
	if err := s.cl.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{"kubevirt.io/created-by": string(vmi.UID)}); err != nil {
		tb.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Status.PodIP != ip || p.Status.Phase != corev1.PodRunning {
			continue
		}
		completeLauncher(&p)
		if err := s.cl.Status().Update(ctx, &p); err != nil {
			tb.Fatalf("the source launcher Pod's end: %v", err)
		}
	}
}
