package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Members are cloned from one VirtualMachineSnapshot of the golden VM, not
// from the VM itself: a VirtualMachineClone of a VM takes a snapshot of its
// own, and KubeVirt lets one snapshot lock a VM at a time
// (pkg/storage/snapshot/source.go), so clones of one golden VM would run
// one after another, each within the same wait. Clones of a snapshot
// restore side by side. One snapshot serves every clone of one state of
// the golden VM (goldenState): a pool create, its growth, and every
// ephemeral release after, until the golden VM or its disks change;
// callers in this process that need it at once share its taking. A
// snapshot of an older state is deleted by the next snapshot taken (once
// no clone and no disk still needs it), or with the last pool of its
// golden VM.

// SnapshotTimeout bounds the wait for a golden VM's snapshot to be ready:
// it may queue behind other snapshots of the same VM (another portal's, a
// backup's).
const SnapshotTimeout = 10 * time.Minute

// LabelSnapshotOf labels the snapshots the portal takes with their golden
// VM, and LabelGoldenState with the state of it they hold (goldenState).
const (
	LabelSnapshotOf  = "corral.dev/vdi-snapshot-of"
	LabelGoldenState = "corral.dev/vdi-golden-state"
)

// sharedSnapshots are the golden VMs' snapshots being found or taken in
// this process.
type sharedSnapshots struct {
	mu sync.Mutex
	m  map[string]*sharedSnapshot // ns/golden/state -> its snapshot
}

// sharedSnapshot is one golden VM state's snapshot, found or being taken.
type sharedSnapshot struct {
	ready chan struct{} // closed when name/err are set
	name  string
	err   error
}

// goldenSnapshot returns a ready VirtualMachineSnapshot of the current
// state of golden: the one the portal took of that state before, or a new
// one, taken once for the callers that need it at the same time.
func (v *VMs) goldenSnapshot(ctx context.Context, golden *kubevirtv1.VirtualMachine) (string, error) {
	namespace := golden.Namespace
	state, err := v.goldenState(ctx, golden)
	if err != nil {
		return "", err
	}
	key := namespace + "/" + golden.Name + "/" + state
	v.snaps.mu.Lock()
	if v.snaps.m == nil {
		v.snaps.m = map[string]*sharedSnapshot{}
	}
	sh := v.snaps.m[key]
	owner := sh == nil
	if owner {
		sh = &sharedSnapshot{ready: make(chan struct{})}
		v.snaps.m[key] = sh
	}
	v.snaps.mu.Unlock()
	if owner {
		sh.name, sh.err = v.stateSnapshot(ctx, golden, state)
		// The next caller looks again: for a snapshot someone deleted, or
		// to try again after a failure.
		v.snaps.mu.Lock()
		delete(v.snaps.m, key)
		v.snaps.mu.Unlock()
		close(sh.ready)
	} else {
		select {
		case <-sh.ready:
		case <-ctx.Done():
			return "", fmt.Errorf("kube: wait for the snapshot of golden VM %s/%s: %w", namespace, golden.Name, context.Cause(ctx))
		}
	}
	return sh.name, sh.err
}

// stateSnapshot returns the portal's ready snapshot of golden in state,
// taking one (and sweeping those of older states) when there is none.
func (v *VMs) stateSnapshot(ctx context.Context, golden *kubevirtv1.VirtualMachine, state string) (string, error) {
	var list snapshotv1beta1.VirtualMachineSnapshotList
	sel := LabelSnapshotOf + "=" + golden.Name + "," + LabelGoldenState + "=" + state
	if err := v.snap.Get().Namespace(golden.Namespace).Resource("virtualmachinesnapshots").
		VersionedParams(&metav1.ListOptions{LabelSelector: sel}, metav1.ParameterCodec).Do(ctx).Into(&list); err != nil {
		return "", fmt.Errorf("kube: list the snapshots of golden VM %s/%s: %w", golden.Namespace, golden.Name, err)
	}
	for _, sn := range list.Items {
		if sn.DeletionTimestamp == nil && sn.Status != nil && sn.Status.ReadyToUse != nil && *sn.Status.ReadyToUse && len(excludedVolumes(&sn)) == 0 {
			return sn.Name, nil
		}
	}
	name, err := v.takeSnapshot(ctx, golden.Namespace, golden.Name, state)
	if err == nil {
		v.sweepSnapshots(ctx, golden.Namespace, golden.Name, name)
	}
	return name, err
}

// goldenState names the state of golden and its disks that a snapshot
// holds: its identity and spec generation (which starting and stopping it
// change too: KubeVirt's start and stop set its run strategy) and the
// identity and size of each PVC it mounts. Status and metadata writes,
// the snapshot controller's own included, do not change it.
func (v *VMs) goldenState(ctx context.Context, golden *kubevirtv1.VirtualMachine) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%d\n", golden.UID, golden.Generation)
	if golden.Spec.Template != nil {
		for _, vol := range golden.Spec.Template.Spec.Volumes {
			claim := ""
			switch {
			case vol.PersistentVolumeClaim != nil:
				claim = vol.PersistentVolumeClaim.ClaimName
			case vol.DataVolume != nil:
				claim = vol.DataVolume.Name
			default:
				continue
			}
			pvc, err := v.addrs.core.PersistentVolumeClaims(golden.Namespace).Get(ctx, claim, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				fmt.Fprintf(h, "%s -\n", claim)
				continue
			} else if err != nil {
				return "", fmt.Errorf("kube: read golden VM %s/%s's disk %s: %w", golden.Namespace, golden.Name, claim, err)
			}
			size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			fmt.Fprintf(h, "%s %s %s\n", claim, pvc.UID, size.String())
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// takeSnapshot snapshots the golden VM in state and waits until the snapshot is
// ready (SnapshotTimeout); one that is not is deleted (no clone uses it
// yet), which also frees the golden VM's snapshot lock.
func (v *VMs) takeSnapshot(ctx context.Context, namespace, golden, state string) (string, error) {
	apiGroup := kubevirtv1.GroupVersion.Group
	sn := &snapshotv1beta1.VirtualMachineSnapshot{
		TypeMeta: metav1.TypeMeta{APIVersion: snapshotv1beta1.SchemeGroupVersion.String(), Kind: "VirtualMachineSnapshot"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: golden + "-corral-",
			Labels: map[string]string{LabelSnapshotOf: golden, LabelGoldenState: state}},
		Spec: snapshotv1beta1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: golden}},
	}
	var made snapshotv1beta1.VirtualMachineSnapshot
	if err := v.snap.Post().Namespace(namespace).Resource("virtualmachinesnapshots").Body(sn).Do(ctx).Into(&made); err != nil {
		return "", fmt.Errorf("kube: snapshot golden VM %s/%s: %w", namespace, golden, err)
	}
	var last snapshotv1beta1.VirtualMachineSnapshot
	err := until(ctx, SnapshotTimeout, namespace, one(v.snap, "virtualmachinesnapshots", namespace, made.Name), &snapshotv1beta1.VirtualMachineSnapshot{},
		func(sn *snapshotv1beta1.VirtualMachineSnapshot) (bool, error) {
			if sn == nil {
				return false, fmt.Errorf("VirtualMachineSnapshot %s/%s was deleted", namespace, made.Name)
			}
			last = *sn
			if st := last.Status; st != nil && st.Phase == snapshotv1beta1.Failed {
				return false, fmt.Errorf("VirtualMachineSnapshot %s/%s failed", namespace, made.Name)
			}
			return last.Status != nil && last.Status.ReadyToUse != nil && *last.Status.ReadyToUse, nil
		})
	if err != nil {
		v.deleteSnapshot(context.WithoutCancel(ctx), namespace, made.Name)
		phase := "no status"
		if last.Status != nil {
			phase = string(last.Status.Phase)
		}
		return "", &vdi.Error{Code: vdi.EUnavailable, Err: err,
			Msg: fmt.Sprintf("Snapshotting golden VM %s/%s made no snapshot to clone from: VirtualMachineSnapshot %s/%s (%s: %v).",
				namespace, golden, namespace, made.Name, phase, err),
			Hint: "Check the StorageClass and VolumeSnapshotClass of the golden VM's disks, that its PVCs can be snapshotted, " +
				"and the snapshot's events (kubectl describe vmsnapshot); another snapshot of the golden VM in progress makes this one wait. Then try again."}
	}
	if left := excludedVolumes(&last); len(left) > 0 {
		v.deleteSnapshot(context.WithoutCancel(ctx), namespace, made.Name)
		return "", vdi.Errorf(vdi.EInvalid, "Give each of those disks' StorageClasses a VolumeSnapshotClass (same driver as the class's provisioner) and make sure their PVCs are Bound, then try again.",
			"Golden VM %s/%s's disks %s were left out of its snapshot, so members would share the golden PVCs.", namespace, golden, strings.Join(left, ", "))
	}
	return made.Name, nil
}

// excludedVolumes returns the volumes a ready snapshot left out (KubeVirt
// marks it readyToUse all the same, and a restore then keeps those
// volumes' claims: the member would mount the golden VM's PVC), and a
// "Partial" indication of later KubeVirt releases as such.
func excludedVolumes(sn *snapshotv1beta1.VirtualMachineSnapshot) []string {
	if sn.Status == nil {
		return nil
	}
	var out []string
	if sv := sn.Status.SnapshotVolumes; sv != nil {
		out = append(out, sv.ExcludedVolumes...)
	}
	partial := false
	for _, si := range sn.Status.SourceIndications {
		partial = partial || si.Indication == "Partial"
	}
	//lint:ignore SA1019 older KubeVirt releases set only the deprecated list
	for _, ind := range sn.Status.Indications {
		partial = partial || ind == "Partial"
	}
	if partial && len(out) == 0 {
		out = append(out, "(some: the snapshot is Partial)")
	}
	return out
}

// deleteSnapshot deletes a snapshot the portal took. A failure leaves it
// behind, labelled LabelSnapshotOf for kubectl users; nothing depends on it.
func (v *VMs) deleteSnapshot(ctx context.Context, namespace, name string) {
	_ = v.snap.Delete().Namespace(namespace).Resource("virtualmachinesnapshots").Name(name).Do(ctx).Error()
}
