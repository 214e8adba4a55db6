package testcluster

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TEST-ONLY: the node stand-ins' part in a live migration, for KubeVirt's
// real migration controller (pkg/virt-controller/watch/migration, v1.7.0),
// played after virt-handler's migration-source.go and migration-target.go.
// A VirtualMachineInstanceMigration goes Pending; virt-controller makes a
// target virt-launcher Pod that keeps off the source's node (pod
// anti-affinity on kubernetes.io/hostname, which the kubelet stand-in
// honours), waits for it to be ready (Scheduling, Scheduled), then hands
// the VMI over: status.migrationState {migrationUid, sourceNode,
// targetNode, targetPod} and the label kubevirt.io/migrationTargetNodeName.
// Then, with two Nodes of one KubeVirt:
//
//  1. the target's virt-handler prepares (listens at the target Pod's IP)
//     and advertises targetNodeAddress and targetDirectMigrationNodePorts
//     (virt-controller: PreparingTarget, TargetReady);
//  2. the source's virt-handler starts the migration: startTimestamp, mode
//     PreCopy (Running); the memory copy takes MigrationTakes; then the
//     source's QEMU exits: its address goes silent (open connections get
//     no more bytes and no FIN), the consoles through its virt-handler
//     end, its launcher Pod goes Succeeded;
//  3. the target's virt-handler sees the domain (targetNodeDomainDetected,
//     targetNodeDomainReadyTimestamp), acknowledges the end (endTimestamp,
//     status.nodeName and the kubevirt.io/nodeName label the target, the
//     interfaces the target Pod's IP), then completes (completed) and drops
//     the migrationTargetNodeName label (virt-controller: Succeeded).
//
// The guest is the same desktop before and after, as a migrated guest's
// memory is. Not played: failures, aborts, post-copy, the migration proxy.

// MigrationTakes is how long the stand-in's memory copy of a live
// migration takes (a small idle guest on a fast network: seconds).
const MigrationTakes = 2 * time.Second

// migrationPort is the port the target advertises in
// targetDirectMigrationNodePorts (virt-handler's migration proxy listens
// on one per migration; the stand-in copies no memory through it).
const migrationPort = "49152"

// migrationStep returns what this node does next for vmi in a live
// migration, or nil.
func (n *Node) migrationStep(vmi *kubevirtv1.VirtualMachineInstance, running bool) func(context.Context, *kubevirtv1.VirtualMachineInstance) error {
	ms := vmi.Status.MigrationState
	if ms == nil || ms.MigrationUID == "" || ms.Completed || ms.Failed || vmi.DeletionTimestamp != nil {
		return nil
	}
	switch {
	case ms.TargetNode == n.Name() && vmi.Labels[kubevirtv1.MigrationTargetNodeNameLabel] == n.Name() && ms.TargetNodeAddress == "":
		return n.prepareTarget
	case ms.TargetNode == n.Name() && ms.StartTimestamp != nil && n.kv.handedOver(ms.MigrationUID):
		return n.migrateIn
	case vmi.Status.NodeName == n.Name() && running && ms.TargetNodeAddress != "" && ms.StartTimestamp == nil:
		return n.migrateOut
	}
	return nil
}

// prepareTarget listens at the target Pod's IP and advertises the target.
func (n *Node) prepareTarget(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	ms := vmi.Status.MigrationState
	pod, err := n.kubelet.cs.CoreV1().Pods(vmi.Namespace).Get(ctx, ms.TargetPod, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the migration's target Pod: %w", err)
	}
	if pod.Spec.NodeName != n.Name() || pod.Status.PodIP == "" {
		return fmt.Errorf("the migration's target Pod %s is not running here", pod.Name)
	}
	n.mu.Lock()
	_, ready := n.incoming[ms.MigrationUID]
	n.mu.Unlock()
	if !ready {
		vnc, err := net.Listen("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(standInPortVNC)))
		if err != nil {
			return fmt.Errorf("the guest's VNC at the target Pod's IP: %w", err)
		}
		rdp, err := net.Listen("tcp", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(standInPortRDP)))
		if err != nil {
			vnc.Close()
			return fmt.Errorf("the guest's RDP at the target Pod's IP: %w", err)
		}
		n.mu.Lock()
		n.incoming[ms.MigrationUID] = []net.Listener{vnc, rdp}
		n.mu.Unlock()
	}
	return n.update(ctx, vmi, func(v *kubevirtv1.VirtualMachineInstance) {
		if m := v.Status.MigrationState; m != nil && m.MigrationUID == ms.MigrationUID {
			m.TargetNodeAddress = n.handlerIP
			m.TargetDirectMigrationNodePorts = map[string]int{migrationPort: 0}
		}
	})
}

// migrateOut starts the migration on the source, copies for
// MigrationTakes, then hands the guest over and ends it here.
func (n *Node) migrateOut(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	uid := vmi.Status.MigrationState.MigrationUID
	now := metav1.Now()
	if err := n.update(ctx, vmi, func(v *kubevirtv1.VirtualMachineInstance) {
		if m := v.Status.MigrationState; m != nil && m.MigrationUID == uid {
			m.StartTimestamp, m.Mode = &now, kubevirtv1.MigrationPreCopy
		}
	}); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(MigrationTakes):
	}
	g := n.takeGuest(vmi)
	if g == nil {
		return fmt.Errorf("no guest to migrate")
	}
	g.leave()
	n.kv.handOver(uid, g)
	// The source's virt-launcher exits once its domain has migrated.
	pods, err := n.kubelet.cs.CoreV1().Pods(vmi.Namespace).List(ctx, metav1.ListOptions{LabelSelector: kubevirtv1.CreatedByLabel + "=" + string(vmi.UID)})
	if err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == n.Name() && p.Status.Phase == corev1.PodRunning {
			completeLauncher(&p)
			if _, err := n.kubelet.cs.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("the source launcher Pod's end: %w", err)
			}
		}
	}
	return nil
}

// migrateIn takes the guest over at the target Pod's IP and completes the
// migration.
func (n *Node) migrateIn(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	uid := vmi.Status.MigrationState.MigrationUID
	g := n.kv.takeOver(uid)
	n.mu.Lock()
	lns := n.incoming[uid]
	delete(n.incoming, uid)
	n.mu.Unlock()
	if g == nil || len(lns) != 2 {
		return fmt.Errorf("nothing to take over for migration %s", uid)
	}
	g.arrive(lns[0], lns[1])
	n.mu.Lock()
	n.guests[vmi.UID] = g
	n.names[vmi.Namespace+"/"+vmi.Name] = vmi.UID
	n.mu.Unlock()
	ip := g.address()
	steps := []func(*kubevirtv1.VirtualMachineInstance){
		func(v *kubevirtv1.VirtualMachineInstance) {
			now := metav1.Now()
			v.Status.MigrationState.TargetNodeDomainDetected = true
			v.Status.MigrationState.TargetNodeDomainReadyTimestamp = &now
		},
		func(v *kubevirtv1.VirtualMachineInstance) {
			now := metav1.Now()
			v.Status.MigrationState.EndTimestamp = &now
			v.Labels[kubevirtv1.NodeNameLabel] = n.Name()
			v.Status.NodeName = n.Name()
			v.Status.Interfaces = n.interfaces(v, ip)
		},
		func(v *kubevirtv1.VirtualMachineInstance) {
			v.Status.MigrationState.Completed = true
			delete(v.Labels, kubevirtv1.MigrationTargetNodeNameLabel)
		},
	}
	for _, step := range steps {
		if err := n.update(ctx, vmi, func(v *kubevirtv1.VirtualMachineInstance) {
			if m := v.Status.MigrationState; m != nil && m.MigrationUID == uid {
				if v.Labels == nil {
					v.Labels = map[string]string{}
				}
				step(v)
			}
		}); err != nil {
			return err
		}
	}
	return nil
}

// completeLauncher marks a source virt-launcher Pod done, as its kubelet
// reports it once its domain has migrated and QEMU exited.
func completeLauncher(p *corev1.Pod) {
	p.Status.Phase = corev1.PodSucceeded
	for i := range p.Status.ContainerStatuses {
		p.Status.ContainerStatuses[i].Ready = false
		p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", FinishedAt: metav1.Now()}}
	}
}

// handOver keeps g for the target of migration uid.
func (kv *KubeVirt) handOver(uid types.UID, g *standInVMI) {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	if kv.migrating == nil {
		kv.migrating = map[types.UID]*standInVMI{}
	}
	kv.migrating[uid] = g
}

// handedOver reports whether the guest of migration uid waits for its
// target.
func (kv *KubeVirt) handedOver(uid types.UID) bool {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	return kv.migrating[uid] != nil
}

// takeOver returns the guest of migration uid, once.
func (kv *KubeVirt) takeOver(uid types.UID) *standInVMI {
	kv.mu.Lock()
	defer kv.mu.Unlock()
	g := kv.migrating[uid]
	delete(kv.migrating, uid)
	return g
}
