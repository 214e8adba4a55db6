package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Members are cloned from one VirtualMachineSnapshot of the golden VM, not
// from the VM itself: a VirtualMachineClone of a VM takes a snapshot of its
// own, and KubeVirt lets one snapshot lock a VM at a time
// (pkg/storage/snapshot/source.go), so clones of one golden VM would run
// one after another, each within the same wait. Clones of a snapshot
// restore side by side. Callers in this process that need the same golden
// VM at once (a pool create, ephemeral releases) share one snapshot; the
// last to finish deletes it, unless a clone of it is still unfinished.

// SnapshotTimeout bounds the wait for a golden VM's snapshot to be ready:
// it may queue behind other snapshots of the same VM (another portal's, a
// backup's).
const SnapshotTimeout = 10 * time.Minute

// LabelSnapshotOf labels the snapshots the portal takes with their golden VM.
const LabelSnapshotOf = "corral.dev/vdi-snapshot-of"

func snapshots(cfg *rest.Config) (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := snapshotv1beta1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &snapshotv1beta1.SchemeGroupVersion
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(c)
}

// sharedSnapshots are the golden VMs' snapshots in use in this process.
type sharedSnapshots struct {
	mu sync.Mutex
	m  map[string]*sharedSnapshot // ns/golden -> its snapshot
}

// sharedSnapshot is one golden VM snapshot and its users.
type sharedSnapshot struct {
	ready chan struct{} // closed when name/err are set
	name  string
	uid   types.UID
	err   error
	users int
	keep  bool // a clone of it did not finish: it must stay
}

// goldenSnapshot returns a ready VirtualMachineSnapshot of the golden VM
// namespace/golden, shared with the callers that need it at the same time,
// and done, which the caller calls once its clones are over, with whether
// they all finished: the last caller deletes the snapshot, unless a clone
// of it did not finish (its restore still reads it).
func (v *VMs) goldenSnapshot(ctx context.Context, namespace, golden string) (name string, done func(finished bool), err error) {
	key := namespace + "/" + golden
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
	sh.users++
	v.snaps.mu.Unlock()
	done = func(finished bool) {
		v.snaps.mu.Lock()
		sh.users--
		sh.keep = sh.keep || !finished
		last := sh.users == 0
		if last && v.snaps.m[key] == sh {
			delete(v.snaps.m, key)
		}
		v.snaps.mu.Unlock()
		if last && !sh.keep && sh.name != "" {
			v.releaseSnapshot(context.WithoutCancel(ctx), namespace, sh.name, sh.uid)
		}
	}
	if owner {
		sh.name, sh.uid, sh.err = v.takeSnapshot(ctx, namespace, golden)
		if sh.err == nil {
			v.sweepSnapshots(ctx, namespace, golden, sh.name)
		}
		if sh.err != nil {
			// The next caller tries again rather than share a failure.
			v.snaps.mu.Lock()
			if v.snaps.m[key] == sh {
				delete(v.snaps.m, key)
			}
			v.snaps.mu.Unlock()
		}
		close(sh.ready)
	} else {
		select {
		case <-sh.ready:
		case <-ctx.Done():
			done(true)
			return "", nil, fmt.Errorf("kube: wait for the snapshot of golden VM %s: %w", key, context.Cause(ctx))
		}
	}
	if sh.err != nil {
		done(true)
		return "", nil, sh.err
	}
	return sh.name, done, nil
}

// takeSnapshot snapshots the golden VM and waits until the snapshot is
// ready (SnapshotTimeout); one that is not is deleted (no clone uses it
// yet), which also frees the golden VM's snapshot lock.
func (v *VMs) takeSnapshot(ctx context.Context, namespace, golden string) (string, types.UID, error) {
	apiGroup := kubevirtv1.GroupVersion.Group
	sn := &snapshotv1beta1.VirtualMachineSnapshot{
		TypeMeta: metav1.TypeMeta{APIVersion: snapshotv1beta1.SchemeGroupVersion.String(), Kind: "VirtualMachineSnapshot"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: golden + "-corral-",
			Labels: map[string]string{LabelSnapshotOf: golden}},
		Spec: snapshotv1beta1.VirtualMachineSnapshotSpec{Source: corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: golden}},
	}
	var made snapshotv1beta1.VirtualMachineSnapshot
	if err := v.snap.Post().Namespace(namespace).Resource("virtualmachinesnapshots").Body(sn).Do(ctx).Into(&made); err != nil {
		return "", "", fmt.Errorf("kube: snapshot golden VM %s/%s: %w", namespace, golden, err)
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
		return "", "", &vdi.Error{Code: vdi.EUnavailable, Err: err,
			Msg: fmt.Sprintf("Snapshotting golden VM %s/%s made no snapshot to clone from: VirtualMachineSnapshot %s/%s (%s: %v).",
				namespace, golden, namespace, made.Name, phase, err),
			Hint: "Check the StorageClass and VolumeSnapshotClass of the golden VM's disks, that its PVCs can be snapshotted, " +
				"and the snapshot's events (kubectl describe vmsnapshot); another snapshot of the golden VM in progress makes this one wait. Then try again."}
	}
	if left := excludedVolumes(&last); len(left) > 0 {
		v.deleteSnapshot(context.WithoutCancel(ctx), namespace, made.Name)
		return "", "", vdi.Errorf(vdi.EInvalid, "Give each of those disks' StorageClasses a VolumeSnapshotClass (same driver as the class's provisioner) and make sure their PVCs are Bound, then try again.",
			"Golden VM %s/%s's disks %s were left out of its snapshot, so members would share the golden PVCs.", namespace, golden, strings.Join(left, ", "))
	}
	return made.Name, made.UID, nil
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
