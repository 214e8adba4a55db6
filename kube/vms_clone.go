package kube

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// CloneTimeout is how long a clone may show no progress (see
// cloneProgress) before its wait gives up on it: a clone on slow storage
// that keeps moving — its phase, its restore, its restored disks binding
// — is waited for however long it takes; one that stands still this long
// is reported, with what it waits on (it goes on all the same).
const CloneTimeout = 2 * time.Minute

// cloneCheckEvery is how often a clone's wait reads it again (see
// cloneFrom).
const cloneCheckEvery = 5 * time.Second

// CloneConcurrency bounds the clones a pool operation runs at once: each
// restores the golden VM's disks from their volume snapshots.
const CloneConcurrency = 4

// LabelCloneTarget labels the portal's VirtualMachineClones with their
// target VM, so that a clone left unfinished is found again;
// LabelClonePool with the pool the target joins, so that a pool whose
// every member is being cloned (the one member of a pool of one, made
// fresh) says so rather than that there is no such pool.
const (
	LabelCloneTarget = "corral.dev/vdi-clone-target"
	LabelClonePool   = "corral.dev/vdi-clone-pool"
)

// errCloneUnfinished: a clone outlived its wait; it goes on, and makes its
// VM (in its pool: the clone carries the labels) when it is done.
var errCloneUnfinished = errors.New("kube: the clone has not finished")

// Recreate makes an ephemeral member fresh: it is cloned again from the
// pool's golden VM (AnnotationSource) under the same name, with the
// member's pool label and annotations. What can take long or fail happens
// before the old VM goes: the golden VM's snapshot (which may queue
// behind others on the golden VM's snapshot lock). The clone after the
// deletion restores from that snapshot and carries the member's labels, so
// a clone that outlives the wait still makes the member: it is reported,
// never deleted.
func (v *VMs) Recreate(ctx context.Context, ref vdi.Ref) error {
	var old kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&old); apierrors.IsNotFound(err) {
		return vdi.Errorf(vdi.ENotFound, "It may have been deleted already.", "No desktop %s.", ref)
	} else if err != nil {
		return fmt.Errorf("kube: recreate %s: %w", ref, err)
	}
	source := old.Annotations[AnnotationSource]
	if source == "" {
		return fmt.Errorf("kube: recreate %s: the VM has no %s annotation naming its golden VM", ref, AnnotationSource)
	}
	// Refuse before deleting anything: a member must not vanish because its
	// golden VM did.
	var golden kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(source).Do(ctx).Into(&golden); apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: recreate %s: golden VM %s/%s not found (members are cloned from a golden VM in their own namespace)", ref, ref.Namespace, source)
	} else if err != nil {
		return fmt.Errorf("kube: recreate %s: %w", ref, err)
	}
	if err := v.labelGolden(ctx, &golden); err != nil {
		return err
	}
	snap, err := v.goldenSnapshot(ctx, &golden)
	if err != nil {
		return fmt.Errorf("kube: recreate %s (the old VM is kept): %w", ref, err)
	}
	ann, err := v.recreatedAnnotations(ctx, &old)
	if err != nil {
		return fmt.Errorf("kube: recreate %s (the old VM is kept): %w", ref, err)
	}
	meta := memberMeta{golden: &golden, labels: map[string]string{vdi.LabelPool: old.Labels[vdi.LabelPool]}, annotations: ann}
	if err := v.deleteVM(ctx, ref, old.UID); err != nil {
		return err
	}
	return v.cloneFrom(ctx, ref.Namespace, cloneSource{kind: "VirtualMachineSnapshot", name: snap}, ref.Name, &meta)
}

// PlanRecreate checks that ref can be made fresh (it is a member whose
// golden VM is there) and returns its pool's definition with ref as the
// one member, for a replica that finds ref gone after a recreate was cut
// short. A member of a pool whose definition cannot be read (Closed) is
// planned with the definition it carries itself, the last it was given,
// so that it is never made again open to everyone; one that carries no
// access of its own is not made fresh at all (EConflict, nothing
// deleted) until an admin sets the pool's access again.
func (v *VMs) PlanRecreate(ctx context.Context, ref vdi.Ref) (vdi.Growth, error) {
	var vm kubevirtv1.VirtualMachine
	if err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&vm); apierrors.IsNotFound(err) {
		return vdi.Growth{}, vdi.Errorf(vdi.ENotFound, "It may have been deleted already.", "No desktop %s.", ref)
	} else if err != nil {
		return vdi.Growth{}, fmt.Errorf("kube: recreate %s: %w", ref, err)
	}
	pool, err := v.list(ctx, ref.Namespace, vm.Labels[vdi.LabelPool])
	if err != nil {
		return vdi.Growth{}, err
	}
	if vm.Labels[vdi.LabelPool] == "" {
		return vdi.Growth{}, vdi.ErrNotAJob
	}
	p := poolFrom(pool)
	if p.Closed != "" {
		if p, err = ownDefinition(&vm, p.Closed); err != nil {
			return vdi.Growth{}, err
		}
	}
	if _, err := v.golden(ctx, ref.Namespace, p.Source); err != nil {
		return vdi.Growth{}, err
	}
	p.LicensesAcknowledged = vm.Annotations[AnnotationLicenses] == "true"
	return vdi.Growth{Pool: p, Members: []string{ref.Name}, Replaces: map[string]string{ref.Name: string(vm.UID)}}, nil
}

// recreatedAnnotations returns the annotations old's fresh clone carries:
// its mode, source and licence mark, and its pool's definition as the
// pool's members agree on it (old's own may be missing: a member that
// lacked it must not pass the gap on), else old's own.
func (v *VMs) recreatedAnnotations(ctx context.Context, old *kubevirtv1.VirtualMachine) (map[string]string, error) {
	pool, err := v.list(ctx, old.Namespace, old.Labels[vdi.LabelPool])
	if err != nil {
		return nil, err
	}
	def := old
	if len(pool) > 0 {
		if d, closed := definingMember(pool); closed == "" {
			def = d
		}
	}
	ann := map[string]string{}
	for _, k := range []string{AnnotationMode, AnnotationSource, AnnotationLicenses} {
		if s, ok := old.Annotations[k]; ok {
			ann[k] = s
		}
	}
	maps.Copy(ann, definitionOf(def))
	return ann, nil
}

// DeleteMargin is how much longer than a VM's termination grace a
// deletion is waited for: KubeVirt's VM controller holds the VM (its
// finalizer) until the guest has shut down, which takes up to that grace
// (30 s by default, often an hour in Windows templates).
const DeleteMargin = 2 * time.Minute

// defaultGrace is KubeVirt's terminationGracePeriodSeconds when a VMI sets none.
const defaultGrace = 30 * time.Second

// deleteVM deletes the VM with uid and waits until it is gone: up to its
// termination grace and DeleteMargin. A clone whose restore made it and
// that KubeVirt has not marked done is settled first (settleClones).
func (v *VMs) deleteVM(ctx context.Context, ref vdi.Ref, uid types.UID) error {
	if err := v.settleClones(ctx, ref, uid); err != nil {
		return err
	}
	wait := v.shutdownGrace(ctx, ref) + DeleteMargin
	err := v.rest.Delete().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}).Do(ctx).Error()
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete VM %s: %w", ref, err)
	}
	err = v.untilVM(ctx, wait, ref, func(vm *kubevirtv1.VirtualMachine) (bool, error) {
		return vm == nil || vm.UID != uid, nil
	})
	var refused *vdi.Error
	if errors.As(err, &refused) {
		return err // the portal may not watch VMs: the error says what to grant
	}
	if err != nil {
		return vdi.Errorf(vdi.EUnavailable, "Its guest may not shut down; kubectl describe vm shows what holds it (its finalizer waits for the VMI to stop).",
			"VM %s is still being deleted after %v (its termination grace and %v): %v.", ref, wait.Round(time.Second), DeleteMargin, err)
	}
	return nil
}

// shutdownGrace is the longest termination grace of ref's VM template and
// its running VMI.
func (v *VMs) shutdownGrace(ctx context.Context, ref vdi.Ref) time.Duration {
	grace := defaultGrace
	var vm kubevirtv1.VirtualMachine
	if v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&vm) == nil &&
		vm.Spec.Template != nil && vm.Spec.Template.Spec.TerminationGracePeriodSeconds != nil {
		grace = time.Duration(*vm.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	if vmi, err := v.addrs.vmi(ctx, ref); err == nil && vmi.Spec.TerminationGracePeriodSeconds != nil {
		grace = max(grace, time.Duration(*vmi.Spec.TerminationGracePeriodSeconds)*time.Second)
	}
	return grace
}

// Clone clones the VM source into target in namespace with a
// VirtualMachineClone (which snapshots source itself, under its snapshot
// lock) and waits for the target VM; see cloneFrom.
func (v *VMs) Clone(ctx context.Context, namespace, source, target string) error {
	return v.cloneFrom(ctx, namespace, cloneSource{kind: "VirtualMachine", name: source}, target, nil)
}

// cloneSource is what a clone copies: a VirtualMachine or a
// VirtualMachineSnapshot.
type cloneSource struct{ kind, name string }

// cloneFrom clones src into target with meta's patches, or takes over the
// unfinished clone of target an earlier call left, and waits for the
// target VM (CloneTimeout). A clone that finishes is deleted, and meta is
// written on its VM in full; one that failed too, with an error naming it;
// one that outlives the wait is left to go on, with an error
// (errCloneUnfinished) saying so.
func (v *VMs) cloneFrom(ctx context.Context, namespace string, src cloneSource, target string, meta *memberMeta) error {
	made, err := v.unfinishedClone(ctx, namespace, target)
	if err != nil {
		return err
	}
	if made == nil {
		group := kubevirtv1.GroupVersion.Group
		if src.kind == "VirtualMachineSnapshot" {
			group = snapshotv1beta1.SchemeGroupVersion.Group
		}
		apiGroup := kubevirtv1.GroupVersion.Group
		vmc := &clonev1beta1.VirtualMachineClone{
			TypeMeta: metav1.TypeMeta{APIVersion: clonev1beta1.SchemeGroupVersion.String(), Kind: "VirtualMachineClone"},
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, GenerateName: target + "-clone-",
				Labels: map[string]string{LabelCloneTarget: target}},
			Spec: clonev1beta1.VirtualMachineCloneSpec{
				Source:  &corev1.TypedLocalObjectReference{APIGroup: &group, Kind: src.kind, Name: src.name},
				Target:  &corev1.TypedLocalObjectReference{APIGroup: &apiGroup, Kind: "VirtualMachine", Name: target},
				Patches: meta.patches(),
			},
		}
		if pool := meta.pool(); pool != "" {
			vmc.Labels[LabelClonePool] = pool
		}
		made = &clonev1beta1.VirtualMachineClone{}
		if err := v.clone.Post().Namespace(namespace).Resource("virtualmachineclones").Body(vmc).Do(ctx).Into(made); err != nil {
			return fmt.Errorf("kube: clone %s %s/%s to %s: %w", src.kind, namespace, src.name, target, err)
		}
	}
	var phase clonev1beta1.VirtualMachineClonePhase
	var restore string
	failed := errors.New("failed")
	cond := func(c *clonev1beta1.VirtualMachineClone) (bool, error) {
		if c == nil {
			return false, fmt.Errorf("%w: VirtualMachineClone %s/%s was deleted", failed, namespace, made.Name)
		}
		phase = c.Status.Phase
		if c.Status.RestoreName != nil {
			restore = *c.Status.RestoreName
		}
		if refused := v.restoreRefused(ctx, c); refused != "" {
			return false, fmt.Errorf("%w: %s", failed, refused)
		}
		switch phase {
		case clonev1beta1.Failed:
			return false, failed
		case clonev1beta1.Succeeded:
			return true, nil
		}
		return false, nil
	}
	// The wait follows the clone's changes, and reads it again every
	// cloneCheckEvery: a restore KubeVirt's admission refuses changes
	// nothing on the clone (the controller retries, leaving an event each
	// time), so only a fresh look sees the refusal. It gives up only on a
	// clone that showed no progress for CloneTimeout.
	moved := cloneMoves{last: "not read yet", since: time.Now()}
	for {
		err = until(ctx, cloneCheckEvery, namespace, one(v.clone, "virtualmachineclones", namespace, made.Name), &clonev1beta1.VirtualMachineClone{}, cond)
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			break
		}
		var c clonev1beta1.VirtualMachineClone
		if v.clone.Get().Namespace(namespace).Resource("virtualmachineclones").Name(made.Name).Do(ctx).Into(&c) == nil {
			if done, cerr := cond(&c); done || cerr != nil {
				err = cerr
				break
			}
			moved.saw(v.cloneProgress(ctx, &c), time.Now())
		}
		if still := moved.still(time.Now()); still >= CloneTimeout {
			err = fmt.Errorf("%w: no progress for %v (%s)", context.DeadlineExceeded, still.Round(time.Second), moved.last)
			break
		}
	}
	forget := func() {
		v.clone.Delete().Namespace(namespace).Resource("virtualmachineclones").Name(made.Name).Do(context.WithoutCancel(ctx))
	}
	hint := "Check the StorageClass and VolumeSnapshotClass of the golden VM's disks, that its PVCs can be snapshotted and restored, " +
		"and the clone's events (kubectl describe vmclone %s -n %s)."
	switch {
	case err == nil:
		forget()
		if err := v.writeMember(ctx, namespace, target, meta); err != nil {
			return err
		}
		return v.ownDisks(ctx, namespace, target, restore)
	case errors.Is(err, failed):
		forget()
		why := ""
		if s := strings.TrimPrefix(strings.TrimPrefix(err.Error(), failed.Error()), ": "); s != "" {
			why = " (KubeVirt: " + s + ")"
		}
		return &vdi.Error{Code: vdi.EUnavailable, Err: failed,
			Msg:  fmt.Sprintf("Cloning %s/%s to %s failed: VirtualMachineClone %s/%s%s.", namespace, src.name, target, namespace, made.Name, why),
			Hint: fmt.Sprintf(hint+" Then try again.", made.Name, namespace)}
	}
	// Timed out, or the caller went away: the clone goes on all the same.
	return &vdi.Error{Code: vdi.EUnavailable, Err: fmt.Errorf("%w: %w", errCloneUnfinished, err),
		Msg: fmt.Sprintf("Cloning %s/%s to %s has not finished: VirtualMachineClone %s/%s is %s (%v). It goes on, and makes the desktop when it is done.",
			namespace, src.name, target, namespace, made.Name, phaseText(phase), err),
		Hint: fmt.Sprintf(hint+" Resizing the pool or recreating the desktop again waits for this clone rather than starting another.", made.Name, namespace)}
}

// restoreRefused returns why KubeVirt's admission refused the restore of
// clone c, or "". The clone controller then stays RestoreInProgress for
// ever, retrying, with a RestoreCreationFailed event; only an admission
// denial is final (an unreachable webhook is not).
func (v *VMs) restoreRefused(ctx context.Context, c *clonev1beta1.VirtualMachineClone) string {
	if c.Status.Phase != clonev1beta1.RestoreInProgress || c.Status.RestoreName != nil {
		return ""
	}
	evs, err := v.addrs.core.Events(c.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.uid=" + string(c.UID) + ",reason=RestoreCreationFailed"})
	if err != nil {
		return ""
	}
	for _, e := range evs.Items {
		if _, why, ok := strings.Cut(e.Message, "denied the request: "); ok {
			return why
		}
	}
	return ""
}

// unfinishedClone returns a clone of target the portal made that is still
// under way, or nil.
func (v *VMs) unfinishedClone(ctx context.Context, namespace, target string) (*clonev1beta1.VirtualMachineClone, error) {
	var list clonev1beta1.VirtualMachineCloneList
	err := v.clone.Get().Namespace(namespace).Resource("virtualmachineclones").
		VersionedParams(&metav1.ListOptions{LabelSelector: LabelCloneTarget + "=" + target}, metav1.ParameterCodec).Do(ctx).Into(&list)
	if err != nil {
		return nil, fmt.Errorf("kube: list the clones of %s/%s: %w", namespace, target, err)
	}
	for i := range list.Items {
		if c := &list.Items[i]; c.DeletionTimestamp == nil && c.Status.Phase != clonev1beta1.Succeeded && c.Status.Phase != clonev1beta1.Failed {
			return c, nil
		}
	}
	return nil, nil
}

func phaseText(p clonev1beta1.VirtualMachineClonePhase) string {
	if p == "" {
		return "waiting to start"
	}
	return string(p)
}
