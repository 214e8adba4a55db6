package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

var (
	_ vdi.PoolAdmin  = (*VMs)(nil)
	_ vdi.PoolGrower = (*VMs)(nil)
)

// CreatePool clones p.Source (a stopped golden VM in p.Namespace) p.Size
// times into members p.Name-1..n, labelled and annotated as the pool: it
// is PlanCreate, then Grow.
func (v *VMs) CreatePool(ctx context.Context, p vdi.Pool) error {
	g, err := v.PlanCreate(ctx, p)
	if err != nil {
		return err
	}
	return v.Grow(ctx, g, nil)
}

// PlanCreate checks that pool p can be made and names its members. Before
// any clone exists it refuses a Windows golden VM above one member
// without p.LicensesAcknowledged, and a size whose members could not all
// run at once for want of the golden VM's GPUs and host devices.
func (v *VMs) PlanCreate(ctx context.Context, p vdi.Pool) (vdi.Growth, error) {
	if p.Kind != vdi.KindVM {
		return vdi.Growth{}, vdi.Errorf(vdi.EInvalid, "On Kubernetes, make a vm pool from a golden VM.", "This portal makes only vm pools here, not %s.", p.Kind)
	}
	golden, err := v.checkGolden(ctx, p.Namespace, p.Source)
	if err != nil {
		return vdi.Growth{}, err
	}
	if existing, err := v.list(ctx, p.Namespace, p.Name); err != nil {
		return vdi.Growth{}, err
	} else if len(existing) > 0 {
		return vdi.Growth{}, vdi.Errorf(vdi.EConflict, "Resize it instead, or pick another name.", "Pool %s/%s exists.", p.Namespace, p.Name)
	}
	ref := vdi.Ref{Namespace: p.Namespace, Name: p.Name}
	if err := checkLicenses(ref, golden, p.Size, p.LicensesAcknowledged, licensesHintCreate); err != nil {
		return vdi.Growth{}, err
	}
	if err := v.admitDevices(ctx, ref, golden, nil, p.Size); err != nil {
		return vdi.Growth{}, err
	}
	if err := v.preflight(ctx, golden); err != nil {
		return vdi.Growth{}, err
	}
	return vdi.Growth{Pool: p, Members: numbered(p.Name, p.Size)}, nil
}

// Grow makes the members of g that are not there yet: one snapshot of the
// golden VM, then a clone of it per member (an unfinished clone of one is
// waited for, not made again). A member still the VM g.Replaces names is
// recreated. It reports progress when progress is not nil.
func (v *VMs) Grow(ctx context.Context, g vdi.Growth, progress func(vdi.Progress)) error {
	if progress == nil {
		progress = func(vdi.Progress) {}
	}
	if g.Pool.Closed != "" {
		// A closed pool's Access reads as nobody's list: members made
		// from it would be open to everyone.
		return vdi.Errorf(vdi.EConflict, "Set the pool's access (and policy) again first: that writes them on every member.",
			"Pool %s/%s is for admins only until its definition is repaired (%s); no member is made from it.", g.Pool.Namespace, g.Pool.Name, g.Pool.Closed)
	}
	golden, err := v.golden(ctx, g.Pool.Namespace, g.Pool.Source)
	if err != nil {
		return err
	}
	vms, err := v.list(ctx, g.Pool.Namespace, g.Pool.Name)
	if err != nil {
		return err
	}
	var todo []string
	for _, name := range g.Members {
		i := slices.IndexFunc(vms, func(vm kubevirtv1.VirtualMachine) bool { return vm.Name == name })
		switch {
		case i < 0:
			todo = append(todo, name)
		case g.Replaces[name] != "" && string(vms[i].UID) == g.Replaces[name]:
			// A recreate cut short before its old VM was deleted: it is
			// finished, never left as it was.
			progress(vdi.Progress{Total: len(g.Members), Text: "recreating " + name})
			err := v.Recreate(ctx, vdi.Ref{Namespace: g.Pool.Namespace, Name: name})
			if vdi.ErrorCode(err) == vdi.ENotFound {
				todo = append(todo, name) // deleted meanwhile: made below
			} else if err != nil {
				return err
			}
		}
	}
	if len(todo) == 0 {
		return nil
	}
	return v.grow(ctx, g.Pool, golden, todo, func(done int, what string) {
		done += len(g.Members) - len(todo)
		progress(vdi.Progress{Done: done, Total: len(g.Members), Text: fmt.Sprintf("cloning %d of %d (%s)", done, len(g.Members), what)})
	})
}

// golden returns the golden VM name in namespace; ENotFound when it is not there.
func (v *VMs) golden(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, error) {
	var golden kubevirtv1.VirtualMachine
	err := v.rest.Get().Namespace(namespace).Resource("virtualmachines").Name(name).Do(ctx).Into(&golden)
	if apierrors.IsNotFound(err) {
		return nil, vdi.Errorf(vdi.ENotFound, "Members are cloned from a golden VM in the pool's own namespace: pass the namespace the golden VM is in.",
			"Golden VM %s not found in namespace %s.", name, namespace)
	} else if err != nil {
		return nil, fmt.Errorf("kube: golden VM %s/%s: %w", namespace, name, err)
	}
	return &golden, nil
}

// checkGolden returns the golden VM, failing unless it exists in namespace,
// is in no pool and is stopped.
func (v *VMs) checkGolden(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, error) {
	if name == "" {
		return nil, vdi.Errorf(vdi.EInvalid, "Name the golden VM to clone members from.", "A vm pool needs a source.")
	}
	golden, err := v.golden(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if golden.Labels[vdi.LabelPool] != "" {
		return nil, vdi.Errorf(vdi.EInvalid, "Clone from a VM that is in no pool.", "VM %s/%s is a member of pool %s.", namespace, name, golden.Labels[vdi.LabelPool])
	}
	if m := memberOf(golden); m.Power != vdi.PowerStopped {
		return nil, vdi.Errorf(vdi.EInvalid, "Stop the golden VM first; clones of a running VM copy a disk in use.",
			"Golden VM %s/%s is %s.", namespace, name, m.Power)
	}
	if what := backendStorage(golden); what != "" {
		return nil, vdi.Errorf(vdi.EInvalid, "Make a golden VM without persistent "+what+" (KubeVirt cannot restore its state to another VM), or make the desktops one by one.",
			"Golden VM %s/%s has a persistent %s.", namespace, name, what)
	}
	return golden, nil
}

// backendStorage names what of vm needs KubeVirt's backend storage
// (persistent TPM or EFI), which a restore to another VM refuses
// (pkg/storage/admitters/vmrestore.go); "" when nothing does.
func backendStorage(vm *kubevirtv1.VirtualMachine) string {
	if vm.Spec.Template == nil {
		return ""
	}
	d := vm.Spec.Template.Spec.Domain
	if tpm := d.Devices.TPM; tpm != nil && tpm.Persistent != nil && *tpm.Persistent {
		return "TPM"
	}
	if fw := d.Firmware; fw != nil && fw.Bootloader != nil && fw.Bootloader.EFI != nil && fw.Bootloader.EFI.Persistent != nil && *fw.Bootloader.EFI.Persistent {
		return "EFI"
	}
	return ""
}

// grow adds members names: one snapshot of the golden VM, then a clone of
// it per member, CloneConcurrency at a time, each carrying the pool's
// labels and annotations (so that a clone that outlives its wait still
// makes a member of the pool when it is done). It tells progress how many
// are done and what it waits for.
func (v *VMs) grow(ctx context.Context, p vdi.Pool, golden *kubevirtv1.VirtualMachine, names []string, progress func(done int, what string)) error {
	policy, err := json.Marshal(p.Policy)
	if err != nil {
		return err
	}
	ann := map[string]string{AnnotationMode: string(p.Mode), AnnotationSource: p.Source, AnnotationPolicy: string(policy),
		AnnotationAccess: accessAnnotation(p.Access, p.Limits), AnnotationStandby: standbyValue(p.Standby)}
	if s := scheduleValue(p.StandbySchedule); s != "" {
		ann[AnnotationStandbySchedule] = s
	}
	if p.LicensesAcknowledged {
		ann[AnnotationLicenses] = "true"
	}
	if err := v.labelGolden(ctx, golden); err != nil {
		return err
	}
	meta := &memberMeta{golden: golden, labels: map[string]string{vdi.LabelPool: p.Name}, annotations: ann}
	progress(0, "snapshotting golden VM "+golden.Name)
	snap, err := v.goldenSnapshot(ctx, golden)
	if err != nil {
		return err
	}
	progress(0, "snapshot ready, restoring…")
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	sem := make(chan struct{}, CloneConcurrency)
	errs := make([]error, len(names))
	for i, name := range names {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("kube: clone %s/%s: %w", p.Namespace, name, context.Cause(ctx))
				return
			}
			defer func() { <-sem }()
			errs[i] = v.cloneFrom(ctx, p.Namespace, cloneSource{kind: "VirtualMachineSnapshot", name: snap}, name, meta)
			if errs[i] == nil {
				mu.Lock()
				done++
				progress(done, "snapshot ready, restoring…")
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// ResizePool grows a pool by cloning (PlanResize, then Grow), or shrinks
// it by deleting unclaimed members, highest numbers first; never a
// claimed one.
func (v *VMs) ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error {
	vms, err := v.list(ctx, namespace, name)
	if err != nil {
		return err
	}
	if len(vms) == 0 {
		return vdi.Errorf(vdi.ENotFound, "", "No pool %s in namespace %s.", name, namespace)
	}
	if size > len(vms) {
		g, err := v.PlanResize(ctx, namespace, name, size)
		if err != nil {
			return err
		}
		return v.Grow(ctx, g, nil)
	}
	drop := len(vms) - size
	// Highest numbers first: desk-10 goes before desk-9.
	slices.SortStableFunc(vms, func(a, b kubevirtv1.VirtualMachine) int {
		return memberNumber(name, a.Name) - memberNumber(name, b.Name)
	})
	var gone []kubevirtv1.VirtualMachine
	var taken []*vdi.Lease
	for i := len(vms) - 1; i >= 0 && len(gone) < drop; i-- {
		if claimed(vms[i].Name) {
			continue
		}
		if v.Leases != nil {
			l, err := takeFor(ctx, v.Leases, namespace, name, vms[i].Name)
			if errors.Is(err, errHeld) {
				continue // claimed since claimed() looked
			} else if err != nil {
				return errors.Join(fmt.Errorf("kube: claim %s/%s to remove it: %w", namespace, vms[i].Name, err), releaseTaken(ctx, v.Leases, taken))
			}
			taken = append(taken, l)
		}
		gone = append(gone, vms[i])
	}
	if len(gone) < drop {
		err := vdi.Errorf(vdi.EConflict, "Release some desktops first, or pick a larger size.",
			"Only %d of pool %s/%s's %d desktops are free; shrinking to %d needs %d.", len(gone), namespace, name, len(vms), size, drop)
		return errors.Join(err, v.releaseTaken(ctx, taken))
	}
	for _, vm := range gone {
		if err = v.deleteVM(ctx, vdi.Ref{Namespace: namespace, Name: vm.Name}, vm.UID); err != nil {
			break
		}
	}
	return errors.Join(err, v.releaseTaken(context.WithoutCancel(ctx), taken))
}

// PlanResize checks resizing a pool to size and names the members a
// growth makes. Growing is admitted as PlanCreate admits a pool: the
// licences of a Windows pool, and room for every member that is not
// running (the new ones and the stopped ones) to run at once with the
// golden VM's devices; and refused while the pool's definition cannot be
// read. A shrink names nothing: it is a job too (each removal waits for
// its guest to shut down).
func (v *VMs) PlanResize(ctx context.Context, namespace, name string, size int) (vdi.Growth, error) {
	vms, err := v.list(ctx, namespace, name)
	if err != nil {
		return vdi.Growth{}, err
	}
	if len(vms) == 0 {
		return vdi.Growth{}, vdi.Errorf(vdi.ENotFound, "", "No pool %s in namespace %s.", name, namespace)
	}
	if size <= len(vms) {
		return vdi.Growth{}, nil
	}
	top := 0
	names := make([]string, len(vms))
	for i, vm := range vms {
		names[i] = vm.Name
		top = max(top, memberNumber(name, vm.Name))
	}
	p := poolFrom(vms)
	if p.Closed != "" {
		return vdi.Growth{}, vdi.Errorf(vdi.EConflict, "Set the pool's access (and policy) again first: that writes them on every member.",
			"Pool %s/%s is for admins only until its definition is repaired (%s); new members would not know whom they are for.", namespace, name, p.Closed)
	}
	// Any member's mark will do: members recreated from the golden VM
	// may have lost theirs.
	p.LicensesAcknowledged = slices.ContainsFunc(vms, func(vm kubevirtv1.VirtualMachine) bool { return vm.Annotations[AnnotationLicenses] == "true" })
	golden, err := v.golden(ctx, namespace, p.Source)
	if err != nil {
		return vdi.Growth{}, err
	}
	ref := vdi.Ref{Namespace: namespace, Name: name}
	if err := checkLicenses(ref, golden, size, p.LicensesAcknowledged, licensesHintResize); err != nil {
		return vdi.Growth{}, err
	}
	if err := v.admitDevices(ctx, ref, golden, names, size-len(vms)); err != nil {
		return vdi.Growth{}, err
	}
	if err := v.preflight(ctx, golden); err != nil {
		return vdi.Growth{}, err
	}
	g := vdi.Growth{Pool: p}
	for i := top + 1; i <= top+size-len(vms); i++ {
		g.Members = append(g.Members, name+"-"+strconv.Itoa(i))
	}
	return g, nil
}

// releaseTaken deletes the Leases a removal took, when VMs has Leases.
func (v *VMs) releaseTaken(ctx context.Context, taken []*vdi.Lease) error {
	if v.Leases == nil {
		return nil
	}
	return releaseTaken(ctx, v.Leases, taken)
}

// SetPolicy writes the pool's policy onto every member.
func (v *VMs) SetPolicy(ctx context.Context, namespace, name string, p vdi.Policy) error {
	policy, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return v.patchMembers(ctx, namespace, name, "policy", map[string]any{AnnotationPolicy: string(policy)})
}

// DeletePool deletes every member VM of the pool (the caller checked that
// nobody holds one). With Leases, each member is claimed first (a member
// claimed meanwhile stops it with EConflict), and the Leases, expired ones
// left behind included, go with the pool.
func (v *VMs) DeletePool(ctx context.Context, namespace, name string) error {
	vms, err := v.list(ctx, namespace, name)
	if err != nil {
		return err
	}
	var taken []*vdi.Lease
	for _, vm := range vms {
		if v.Leases == nil {
			break
		}
		l, err := takeFor(ctx, v.Leases, namespace, name, vm.Name)
		if errors.Is(err, errHeld) {
			return errors.Join(vdi.Errorf(vdi.EConflict, "Force-release it first, then delete the pool.",
				"Desktop %s/%s was claimed meanwhile.", namespace, vm.Name), v.releaseTaken(ctx, taken))
		} else if err != nil {
			return errors.Join(fmt.Errorf("kube: claim %s/%s to remove it: %w", namespace, vm.Name, err), v.releaseTaken(ctx, taken))
		}
		taken = append(taken, l)
	}
	// Members go (and are waited for) before their Leases, so that no claim
	// lands on a VM on its way out.
	for _, vm := range vms {
		if err = v.deleteVM(ctx, vdi.Ref{Namespace: namespace, Name: vm.Name}, vm.UID); err != nil {
			break
		}
	}
	if err == nil && len(vms) > 0 {
		v.sweepUnused(ctx, namespace, vms[0].Annotations[AnnotationSource])
	}
	return errors.Join(err, v.releaseTaken(context.WithoutCancel(ctx), taken))
}

// sweepUnused deletes the snapshots of golden that no disk or clone needs
// once no pool in namespace is cloned from it any more.
func (v *VMs) sweepUnused(ctx context.Context, namespace, golden string) {
	if golden == "" {
		return
	}
	left, err := v.list(ctx, namespace, "")
	if err != nil || slices.ContainsFunc(left, func(vm kubevirtv1.VirtualMachine) bool { return vm.Annotations[AnnotationSource] == golden }) {
		return
	}
	v.sweepSnapshots(ctx, namespace, golden, "")
}

// memberNumber is the number of pool's member (0 for a name of another
// shape).
func memberNumber(pool, member string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(member, pool+"-"))
	if err != nil {
		return 0
	}
	return n
}
