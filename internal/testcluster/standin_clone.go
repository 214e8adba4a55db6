package testcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TEST-ONLY: the stand-in's VirtualMachineSnapshots and
// VirtualMachineClones, strict where KubeVirt is
// (pkg/storage/snapshot/source.go): a snapshot locks its source VM
// (status.snapshotInProgress) while it is taken, and only one snapshot
// locks a VM at a time, so that the clones of one source VM (each takes a
// snapshot of its own) queue behind each other. A clone from a
// VirtualMachineSnapshot takes no lock: restores of one snapshot run side
// by side. How long a snapshot and a restore take is SlowClones'.
//
// What fails a clone and what only holds it back is KubeVirt v1.7's
// (pkg/virt-controller/watch/clone/clone.go, pkg/storage/snapshot/
// restore.go): a source that does not exist (yet) leaves the clone
// waiting; an error writing the target (a Conflict, the API server
// unreachable) is tried again on the next pass, which takes a target VM
// its restore made on an earlier pass (its restore.kubevirt.io/
// lastRestoreUID) as made; a target VM of that name made otherwise holds
// the clone in RestoreInProgress (KubeVirt's "restore target already
// exists") until it is gone.
//
// Simplified: no VolumeSnapshots or DataVolumes; the snapshot's content
// (the VM as it was) is kept in memory, so a clone from a snapshot taken
// before the stand-in started fails; so does a clone with a patch that
// does not apply (KubeVirt's admission refuses its restore, which then
// never comes).

// cloneTimes is how long the stand-in takes to snapshot a VM and to
// restore a snapshot into a new VM.
type cloneTimes struct{ snapshot, restore time.Duration }

// cloneJob is a snapshot or clone under way: its stage and when it ends.
type cloneJob struct {
	clone bool   // a clone, else a snapshot
	stage string // "snapshot" or "restore"
	until time.Time
	lock  string // the ns/VM it locks, while it does
	tried string // the error of its last pass, logged once
}

// SlowClones makes the snapshots of namespace take snapshot each and its
// restores restore each (a clone of a VM does both, one after the other).
func (s *KubeVirtStandIn) SlowClones(namespace string, snapshot, restore time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slow[namespace] = cloneTimes{snapshot, restore}
}

// HoldClones leaves the VirtualMachineClones of namespace waiting before
// their restore, as a clone whose volume restore never binds would, until
// ReleaseClones.
func (s *KubeVirtStandIn) HoldClones(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held[namespace] = true
}

// HoldSnapshots leaves the VirtualMachineSnapshots of namespace in
// progress, as a snapshot whose VolumeSnapshots never become ready would,
// until ReleaseClones. Clones of VMs wait too: they snapshot first.
func (s *KubeVirtStandIn) HoldSnapshots(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.heldSn[namespace] = true
}

// ReleaseClones lets the snapshots and clones of namespace go on.
func (s *KubeVirtStandIn) ReleaseClones(namespace string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, namespace)
	delete(s.heldSn, namespace)
}

// lockSource makes holder the one snapshot of VM key, reporting whether it
// is (it may be already).
func (s *KubeVirtStandIn) lockSource(key, holder string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if h, ok := s.locks[key]; ok {
		return h == holder
	}
	s.locks[key] = holder
	return true
}

func (s *KubeVirtStandIn) unlockSource(key, holder string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.locks[key] == holder {
		delete(s.locks, key)
	}
}

// snapshotInProgress writes the VM's status.snapshotInProgress (nil clears it).
func (s *KubeVirtStandIn) snapshotInProgress(ctx context.Context, ns, vm string, name *string) {
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"snapshotInProgress": name}})
	obj := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: vm}}
	if err := s.cl.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		s.logf("status of VM %s/%s: %v", ns, vm, err)
	}
}

// startSnapshot takes the lock on ns/source for job holder and keeps the
// VM as it is now under image; false while another holds the lock.
func (s *KubeVirtStandIn) startSnapshot(ctx context.Context, ns, source, holder string, image types.UID) (bool, error) {
	key := ns + "/" + source
	if !s.lockSource(key, holder) {
		return false, nil
	}
	var vm kubevirtv1.VirtualMachine
	if err := s.cl.Get(ctx, client.ObjectKey{Namespace: ns, Name: source}, &vm); err != nil {
		s.unlockSource(key, holder)
		return false, err
	}
	s.snapshotInProgress(ctx, ns, source, &holder)
	s.mu.Lock()
	s.images[image] = vm.DeepCopy()
	s.mu.Unlock()
	return true, nil
}

// endSnapshot lets go of the lock on ns/source.
func (s *KubeVirtStandIn) endSnapshot(ctx context.Context, ns, source, holder string) {
	s.unlockSource(ns+"/"+source, holder)
	s.snapshotInProgress(ctx, ns, source, nil)
}

// runSnapshots moves each VirtualMachineSnapshot on a step.
func (s *KubeVirtStandIn) runSnapshots(ctx context.Context) {
	var list snapshotv1beta1.VirtualMachineSnapshotList
	if err := s.cl.List(ctx, &list); err != nil {
		return
	}
	seen := map[types.UID]bool{}
	now := time.Now()
	for i := range list.Items {
		sn := &list.Items[i]
		seen[sn.UID] = true
		if sn.Status != nil && (sn.Status.Phase == snapshotv1beta1.Succeeded || sn.Status.Phase == snapshotv1beta1.Failed) {
			continue
		}
		s.mu.Lock()
		job, held, times := s.jobs[sn.UID], s.heldSn[sn.Namespace], s.slow[sn.Namespace]
		s.mu.Unlock()
		holder := "snapshot " + sn.Name
		switch {
		case job == nil && held:
			s.snapshotStatus(ctx, sn, snapshotv1beta1.InProgress, false)
		case job == nil:
			ok, err := s.startSnapshot(ctx, sn.Namespace, sn.Spec.Source.Name, holder, sn.UID)
			if err != nil {
				s.snapshotStatus(ctx, sn, snapshotv1beta1.Failed, false)
				continue
			}
			s.snapshotStatus(ctx, sn, snapshotv1beta1.InProgress, false)
			if ok {
				s.mu.Lock()
				s.jobs[sn.UID] = &cloneJob{stage: "snapshot", until: now.Add(times.snapshot), lock: sn.Namespace + "/" + sn.Spec.Source.Name}
				s.mu.Unlock()
			}
		case now.After(job.until):
			s.endSnapshot(ctx, sn.Namespace, sn.Spec.Source.Name, holder)
			s.snapshotStatus(ctx, sn, snapshotv1beta1.Succeeded, true)
			s.mu.Lock()
			delete(s.jobs, sn.UID)
			s.mu.Unlock()
		}
	}
	s.forget(ctx, false, seen)
	// The content of a snapshot that is gone goes too (clones keep theirs
	// under their own UID while they run).
	s.mu.Lock()
	for uid := range s.images {
		if !seen[uid] && s.jobs[uid] == nil {
			delete(s.images, uid)
		}
	}
	s.mu.Unlock()
}

// snapshotStatus writes sn's phase and readiness.
func (s *KubeVirtStandIn) snapshotStatus(ctx context.Context, sn *snapshotv1beta1.VirtualMachineSnapshot, phase snapshotv1beta1.VirtualMachineSnapshotPhase, ready bool) {
	if sn.Status != nil && sn.Status.Phase == phase {
		return
	}
	st := map[string]any{"phase": phase, "readyToUse": ready}
	s.mu.Lock()
	if img := s.images[sn.UID]; img != nil {
		st["sourceUID"] = img.UID
	}
	s.mu.Unlock()
	if ready {
		st["creationTime"] = metav1.Now()
	}
	patch, _ := json.Marshal(map[string]any{"status": st})
	if err := s.cl.Status().Patch(ctx, sn, client.RawPatch(types.MergePatchType, patch)); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		s.logf("status of VirtualMachineSnapshot %s/%s: %v", sn.Namespace, sn.Name, err)
	}
}

// forget drops the jobs of snapshots (or clones) that were deleted, with
// their locks, as KubeVirt would abort them.
func (s *KubeVirtStandIn) forget(ctx context.Context, clones bool, seen map[types.UID]bool) {
	s.mu.Lock()
	var gone []*cloneJob
	for uid, job := range s.jobs {
		if job.clone == clones && !seen[uid] {
			gone = append(gone, job)
			delete(s.jobs, uid)
			delete(s.images, uid)
		}
	}
	var free []string
	for _, job := range gone {
		if job.lock != "" {
			free = append(free, job.lock)
		}
	}
	s.mu.Unlock()
	for _, key := range free {
		s.mu.Lock()
		delete(s.locks, key)
		s.mu.Unlock()
		ns, name, _ := strings.Cut(key, "/")
		s.snapshotInProgress(ctx, ns, name, nil)
	}
}

// runClones moves each VirtualMachineClone on a step: from a VM, a
// snapshot (under the source's lock) then a restore; from a
// VirtualMachineSnapshot, a restore; then the target VM.
func (s *KubeVirtStandIn) runClones(ctx context.Context) {
	var list clonev1beta1.VirtualMachineCloneList
	if err := s.cl.List(ctx, &list); err != nil {
		return
	}
	seen := map[types.UID]bool{}
	now := time.Now()
	for i := range list.Items {
		c := &list.Items[i]
		seen[c.UID] = true
		if c.Status.Phase == clonev1beta1.Succeeded || c.Status.Phase == clonev1beta1.Failed || c.Spec.Source == nil || c.Spec.Target == nil {
			continue
		}
		s.mu.Lock()
		job, held, times := s.jobs[c.UID], s.held[c.Namespace], s.slow[c.Namespace]
		s.mu.Unlock()
		holder := "clone " + c.Name
		fail := func(err error) {
			s.logf("clone %s/%s: %v", c.Namespace, c.Name, err)
			s.clonePhase(ctx, c, clonev1beta1.Failed)
		}
		switch {
		case job == nil && c.Spec.Source.Kind == "VirtualMachineSnapshot":
			var sn snapshotv1beta1.VirtualMachineSnapshot
			if err := s.cl.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Source.Name}, &sn); err != nil {
				continue // KubeVirt waits for a source that is not there, and tries again on other errors
			}
			if sn.Status == nil || sn.Status.ReadyToUse == nil || !*sn.Status.ReadyToUse {
				continue // KubeVirt waits for it
			}
			s.mu.Lock()
			img := s.images[sn.UID]
			if img != nil {
				s.images[c.UID] = img
				s.jobs[c.UID] = &cloneJob{clone: true, stage: "restore", until: now.Add(times.restore)}
			}
			s.mu.Unlock()
			if img == nil {
				fail(fmt.Errorf("the stand-in does not know the content of snapshot %s", sn.Name))
				continue
			}
			s.clonePhase(ctx, c, clonev1beta1.RestoreInProgress)
		case job == nil:
			ok, err := s.startSnapshot(ctx, c.Namespace, c.Spec.Source.Name, holder, c.UID)
			if err != nil {
				continue // as above
			}
			s.clonePhase(ctx, c, clonev1beta1.SnapshotInProgress)
			if ok {
				s.mu.Lock()
				s.jobs[c.UID] = &cloneJob{clone: true, stage: "snapshot", until: now.Add(times.snapshot), lock: c.Namespace + "/" + c.Spec.Source.Name}
				s.mu.Unlock()
			}
		case job.stage == "snapshot" && now.After(job.until):
			s.endSnapshot(ctx, c.Namespace, c.Spec.Source.Name, holder)
			s.mu.Lock()
			job.stage, job.until, job.lock = "restore", now.Add(times.restore), ""
			s.mu.Unlock()
			s.clonePhase(ctx, c, clonev1beta1.RestoreInProgress)
		case job.stage == "restore" && now.After(job.until) && !held:
			s.mu.Lock()
			img := s.images[c.UID]
			s.mu.Unlock()
			err := s.createTarget(ctx, c, img)
			var final *patchError
			switch {
			case errors.As(err, &final):
				fail(err)
			case err != nil:
				s.mu.Lock()
				again := job.tried == err.Error()
				job.tried = err.Error()
				s.mu.Unlock()
				if !again && ctx.Err() == nil {
					s.logf("clone %s/%s (tried again): %v", c.Namespace, c.Name, err)
				}
				continue // the job stays: the next pass tries again
			default:
				s.clonePhase(ctx, c, clonev1beta1.Succeeded)
			}
			s.mu.Lock()
			delete(s.jobs, c.UID)
			delete(s.images, c.UID)
			s.mu.Unlock()
		}
	}
	s.forget(ctx, true, seen)
}

// clonePhase writes c's phase.
func (s *KubeVirtStandIn) clonePhase(ctx context.Context, c *clonev1beta1.VirtualMachineClone, phase clonev1beta1.VirtualMachineClonePhase) {
	if c.Status.Phase == phase {
		return
	}
	status := map[string]any{"phase": phase}
	if phase == clonev1beta1.Succeeded {
		status["restoreName"] = restoreName(c)
	}
	st, _ := json.Marshal(map[string]any{"status": status})
	if err := s.cl.Status().Patch(ctx, c, client.RawPatch(types.MergePatchType, st)); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		s.logf("status of clone %s/%s: %v", c.Namespace, c.Name, err)
	}
	c.Status.Phase = phase
}

// patchError is a clone patch that does not apply: final, unlike the
// errors of writing the target.
type patchError struct{ err error }

func (e *patchError) Error() string { return e.err.Error() }

// lastRestoreUID is the annotation KubeVirt's restore writes on the VM it
// makes (pkg/storage/snapshot/restore.go, lastRestoreAnnotation).
const lastRestoreUID = "restore.kubevirt.io/lastRestoreUID"

// createTarget makes c's target VM from img, the source as snapshotted:
// its spec, labels and annotations (KubeVirt's defaults with no filters),
// halted, with the restore's lastRestoreUID annotation and c's JSON patches
// applied (pkg/storage/snapshot/restore.go), and new disks
// (standin_disks.go). It may be called again after an error: a target
// this clone's restore made already is taken as made; one made otherwise
// is an error (KubeVirt's restore does not write over it).
func (s *KubeVirtStandIn) createTarget(ctx context.Context, c *clonev1beta1.VirtualMachineClone, img *kubevirtv1.VirtualMachine) error {
	if img == nil {
		return &patchError{fmt.Errorf("no source content")}
	}
	made := "restore-" + string(c.UID)
	var existing kubevirtv1.VirtualMachine
	switch err := s.cl.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Spec.Target.Name}, &existing); {
	case err == nil && existing.Annotations[lastRestoreUID] != made:
		return fmt.Errorf("restore source and restore target are different but restore target already exists")
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	halted := kubevirtv1.RunStrategyHalted
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.GroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Spec.Target.Name, Labels: img.Labels, Annotations: maps.Clone(img.Annotations)},
		Spec:       *img.Spec.DeepCopy(),
	}
	if vm.Annotations == nil {
		vm.Annotations = map[string]string{}
	}
	vm.Annotations[lastRestoreUID] = made
	vm.Spec.RunStrategy, vm.Spec.Running = &halted, nil
	if len(c.Spec.Patches) > 0 {
		doc, err := json.Marshal(vm)
		if err != nil {
			return err
		}
		for _, p := range c.Spec.Patches {
			patch, err := jsonpatch.DecodePatch([]byte("[" + p + "]"))
			if err != nil {
				return &patchError{fmt.Errorf("patch %s: %w", p, err)}
			}
			if doc, err = patch.Apply(doc); err != nil {
				return &patchError{fmt.Errorf("patch %s: %w", p, err)}
			}
		}
		vm = &kubevirtv1.VirtualMachine{}
		if err := json.Unmarshal(doc, vm); err != nil {
			return err
		}
	}
	pvcs, owned, err := s.restoreDisks(ctx, restoreName(c), img, vm)
	if err != nil {
		return err
	}
	if existing.UID == "" {
		if err := s.cl.Create(ctx, vm); err != nil {
			return err
		}
	} else {
		vm = &existing // made on an earlier pass
	}
	if err := s.createDisks(ctx, vm, pvcs, owned); err != nil {
		return err
	}
	// The VM controller's status: a patch, as it retries its writes until
	// they land.
	st, _ := json.Marshal(map[string]any{"status": map[string]any{"printableStatus": kubevirtv1.VirtualMachineStatusStopped}})
	return s.cl.Status().Patch(ctx, vm, client.RawPatch(types.MergePatchType, st))
}

// restoreName names the VirtualMachineRestore that KubeVirt's clone
// controller would make for c (status.restoreName), which the restored
// PVCs carry in their restore.kubevirt.io/name annotation.
func restoreName(c *clonev1beta1.VirtualMachineClone) string {
	return "restore-" + string(c.UID)[:8]
}
