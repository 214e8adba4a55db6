package kube

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A VM pool's definition (who may use it, its limits, policy and standby)
// is carried by every member in annotations, so it fails closed in two
// ways. A clone carries it from its first moment: the JSON values, which
// the restore admission's text split would refuse (see memberMeta), go
// into the clone's patches encoded (encodedPrefix) and are written as
// plain JSON once the clone is seen done. And a pool is read from all its
// members, not one: a member without the pool's access (a hand edit, a
// clone made by an older portal) is Closed and takes no claim, and a pool
// whose members carry no access at all, or disagree on it, is Closed:
// admins only; a clone's planned definition, which an admin's change may
// have overtaken while it was made, yields to the written one of the
// others (definingMember). The reclaim loop writes the pool's definition
// back on members that lack it or carry their plan's (RepairDefinitions).

// encodedPrefix starts an annotation value carried through a clone's
// patches as unpadded base64url: no `,` `:` `{` `}` for the admission to
// split on.
const encodedPrefix = "base64url."

// definitionKeys are the annotations that make a VM pool's definition.
var definitionKeys = []string{AnnotationPolicy, AnnotationAccess, AnnotationStandby, AnnotationStandbySchedule}

// encodeValue returns s as a clone's patch may carry it.
func encodeValue(s string) string {
	return encodedPrefix + base64.RawURLEncoding.EncodeToString([]byte(s))
}

// annotation returns vm's annotation k, decoding a value a clone's patches
// carried encoded; a value that does not decode reads as itself (and then
// does not parse where JSON is wanted).
func annotation(vm *kubevirtv1.VirtualMachine, k string) string {
	s := vm.Annotations[k]
	if enc, ok := strings.CutPrefix(s, encodedPrefix); ok {
		if b, err := base64.RawURLEncoding.DecodeString(enc); err == nil {
			return string(b)
		}
	}
	return s
}

// definitionOf returns the pool's definition as vm carries it: each of
// its definition annotations that is set, decoded.
func definitionOf(vm *kubevirtv1.VirtualMachine) map[string]string {
	out := map[string]string{}
	for _, k := range definitionKeys {
		if s := annotation(vm, k); s != "" {
			out[k] = s
		}
	}
	return out
}

// memberDefinition returns who may use vm's pool and its policy as vm
// carries them, in a canonical form for comparing members, and whether vm
// carries either; err when one does not parse.
func memberDefinition(vm *kubevirtv1.VirtualMachine) (canon string, ok bool, err error) {
	a, pol := annotation(vm, AnnotationAccess), annotation(vm, AnnotationPolicy)
	if a == "" && pol == "" {
		return "", false, nil
	}
	var d struct {
		accessDoc
		Policy vdi.Policy `json:"policy"`
	}
	if a != "" {
		if err := json.Unmarshal([]byte(a), &d.accessDoc); err != nil {
			return "", true, fmt.Errorf("%s: %w", AnnotationAccess, err)
		}
	}
	if pol != "" {
		if err := json.Unmarshal([]byte(pol), &d.Policy); err != nil {
			return "", true, fmt.Errorf("%s: %w", AnnotationPolicy, err)
		}
	}
	b, _ := json.Marshal(d)
	return string(b), true, nil
}

// poolFrom describes the pool whose members are vms (one pool, at least
// one member): the definition the members carry, Closed when they carry
// none that can be read or disagree on it.
func poolFrom(vms []kubevirtv1.VirtualMachine) vdi.Pool {
	def, closed := definingMember(vms)
	p := poolOf(def)
	p.Size = len(vms)
	if closed != "" {
		p.Access, p.Limits, p.Closed = vdi.Access{}, vdi.Limits{}, closed
	}
	return p
}

// definingMember returns the member whose annotations define the pool of
// vms, and why the pool is closed ("" when it is not). The members whose
// definition the portal wrote once they were done define it; a clone's
// planned one (carried encoded through its patches: a clone the portal
// never saw finish) was the pool's when the clone was planned, and an
// admin's change since is written on the others only, so it counts only
// where no member carries a written one (a pool all of whose clones
// outlived their wait). Until the reclaim loop writes the pool's on it
// (RepairDefinitions), such a member is closed if it disagrees
// (closedMembers), and the pool is not.
func definingMember(vms []kubevirtv1.VirtualMachine) (*kubevirtv1.VirtualMachine, string) {
	def, closed := agreedMember(vms, func(vm *kubevirtv1.VirtualMachine) bool { return !carriesEncoded(vm) })
	if def == nil && closed == "" {
		def, closed = agreedMember(vms, func(*kubevirtv1.VirtualMachine) bool { return true })
	}
	switch {
	case def != nil || closed != "":
		return def, closed
	case slices.ContainsFunc(vms, func(vm kubevirtv1.VirtualMachine) bool { return vm.Annotations[AnnotationSource] != "" }):
		// Made by the portal (cloned from a golden VM), so made with one.
		return &vms[0], fmt.Sprintf("no member carries the pool's access and policy (%s, %s)", AnnotationAccess, AnnotationPolicy)
	}
	// VMs labelled into a pool by hand, with no access or policy written:
	// open to everyone signed in, as docs/kubernetes.md says.
	return &vms[0], ""
}

// agreedMember returns the first of the members of vms that count and
// carry a definition, when all those agree on it; else why the pool is
// closed. It returns neither when none carries one.
func agreedMember(vms []kubevirtv1.VirtualMachine, counts func(*kubevirtv1.VirtualMachine) bool) (*kubevirtv1.VirtualMachine, string) {
	var def *kubevirtv1.VirtualMachine
	var want string
	for i := range vms {
		vm := &vms[i]
		if !counts(vm) {
			continue
		}
		canon, ok, err := memberDefinition(vm)
		switch {
		case err != nil:
			return vm, fmt.Sprintf("%s does not parse: %v", vm.Name, err)
		case !ok:
			continue
		case def == nil:
			def, want = vm, canon
		case canon != want:
			return def, fmt.Sprintf("members %s and %s disagree on who may use the pool or its policy (%s, %s)", def.Name, vm.Name, AnnotationAccess, AnnotationPolicy)
		}
	}
	return def, ""
}

// ownDefinition is the pool of vm as vm alone carries its definition,
// for making vm fresh while its pool is closed (closed says why): vm is
// made again for whom it last was. A member that carries no access of its
// own, or one that does not parse, is refused (EConflict): read alone it
// would be open to everyone.
func ownDefinition(vm *kubevirtv1.VirtualMachine, closed string) (vdi.Pool, error) {
	if _, _, err := memberDefinition(vm); err != nil || annotation(vm, AnnotationAccess) == "" {
		return vdi.Pool{}, vdi.Errorf(vdi.EConflict, "Set the pool's access (and policy) again: that writes them on every member; then release it again.",
			"Desktop %s/%s cannot be made fresh: its pool is for admins only until its definition is repaired (%s), and it carries no access of its own to be made again with.",
			vm.Namespace, vm.Name, closed)
	}
	p := poolOf(vm)
	p.Size = 1
	return p, nil
}

// closedMembers returns why each member of the pool of vms that does not
// carry the pool's definition is closed, by name: only when the pool
// itself is defined (a closed pool is closed as a whole).
func closedMembers(vms []kubevirtv1.VirtualMachine) map[string]string {
	if len(vms) == 0 {
		return nil
	}
	def, closed := definingMember(vms)
	if closed != "" {
		return nil
	}
	want, defined, _ := memberDefinition(def)
	if !defined {
		return nil
	}
	var out map[string]string
	for i := range vms {
		if canon, _, _ := memberDefinition(&vms[i]); canon != want {
			if out == nil {
				out = map[string]string{}
			}
			why := fmt.Sprintf("it does not carry its pool's access and policy (%s, %s); the reclaim loop writes them", AnnotationAccess, AnnotationPolicy)
			if carriesEncoded(&vms[i]) {
				why = "it carries the access and policy its clone was planned with, which an admin has changed since; the reclaim loop writes the pool's"
			}
			out[vms[i].Name] = why
		}
	}
	return out
}

// RepairDefinitions writes each defined VM pool's definition, as plain
// JSON, on the members that lack it or carry it encoded (a clone whose
// wait ended before it was done); a closed pool is left for an admin to
// set again. It returns how many members it wrote.
func (v *VMs) RepairDefinitions(ctx context.Context) (int, error) {
	vms, err := v.list(ctx, "", "")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, pool := range groupPools(vms) {
		def, closed := definingMember(pool)
		if closed != "" {
			continue
		}
		want, defined, _ := memberDefinition(def)
		if !defined {
			continue // labelled by hand: nothing to copy
		}
		ann := map[string]any{}
		for _, k := range definitionKeys {
			ann[k] = nil // null deletes what def does not carry
		}
		for k, s := range definitionOf(def) {
			ann[k] = s
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		for i := range pool {
			vm := &pool[i]
			if canon, _, _ := memberDefinition(vm); canon == want && !carriesEncoded(vm) {
				continue
			}
			if err := v.patchVM(ctx, vm.Namespace, vm.Name, patch); err != nil {
				return n, fmt.Errorf("kube: write pool %s's definition on VM %s/%s: %w", vm.Labels[vdi.LabelPool], vm.Namespace, vm.Name, err)
			}
			n++
		}
	}
	return n, nil
}

// carriesEncoded reports whether vm has a definition annotation still in
// its clone's encoding.
func carriesEncoded(vm *kubevirtv1.VirtualMachine) bool {
	for _, k := range definitionKeys {
		if strings.HasPrefix(vm.Annotations[k], encodedPrefix) {
			return true
		}
	}
	return false
}

// groupPools splits members (sorted by namespace and name, as list
// returns them) into their pools, in order of first appearance.
func groupPools(vms []kubevirtv1.VirtualMachine) [][]kubevirtv1.VirtualMachine {
	var out [][]kubevirtv1.VirtualMachine
	at := map[vdi.Ref]int{}
	for _, vm := range vms {
		key := vdi.Ref{Namespace: vm.Namespace, Name: vm.Labels[vdi.LabelPool]}
		j, ok := at[key]
		if !ok {
			j = len(out)
			at[key] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], vm)
	}
	return out
}

// currentDefinition returns meta's annotations with its pool's definition
// as the pool's members other than name carry it now, read from the API
// server, when they agree on one; and name's resourceVersion as read with
// them ("" when the list does not show it yet). When they carry none that
// can be read (a closed pool: meta holds the member's own, see
// ownDefinition), or there is no other member, meta's stays.
func (v *VMs) currentDefinition(ctx context.Context, namespace, name string, meta *memberMeta) (map[string]string, string, error) {
	ann := maps.Clone(meta.annotations)
	pool := meta.labels[vdi.LabelPool]
	if pool == "" {
		return ann, "", nil
	}
	vms, err := v.liveList(ctx, namespace, pool)
	if err != nil {
		return nil, "", err
	}
	version := ""
	var others []kubevirtv1.VirtualMachine
	for _, vm := range vms {
		if vm.Name == name {
			version = vm.ResourceVersion
		} else if vm.DeletionTimestamp == nil {
			others = append(others, vm)
		}
	}
	if len(others) == 0 {
		return ann, version, nil
	}
	def, closed := definingMember(others)
	if _, defined, _ := memberDefinition(def); closed != "" || !defined {
		return ann, version, nil
	}
	for _, k := range definitionKeys {
		delete(ann, k)
	}
	maps.Copy(ann, definitionOf(def))
	return ann, version, nil
}

// patchMembers writes part, a part of pool namespace/name's definition
// (what names it), on every member, then reads the members again from
// the API server and writes it on those that were not listed: a clone
// done meanwhile (a reset's re-clone) may have read the others before
// they were written (see writeMember), and its write, conditional on
// its own version, loses to this one or reads it. A member that carries
// its clone's planned definition (see definingMember) gets the whole
// definition, part on top of the pool's as it reads now, so that it
// agrees with the others from then on instead of carrying part of the
// new definition and the rest of its plan's.
func (v *VMs) patchMembers(ctx context.Context, namespace, name, what string, part map[string]any) error {
	vms, err := v.list(ctx, namespace, name)
	if err != nil {
		return err
	}
	whole := map[string]any{}
	if len(vms) > 0 {
		if def, closed := definingMember(vms); closed == "" {
			for _, k := range definitionKeys {
				whole[k] = nil // null deletes what the pool's definition lacks
			}
			for k, s := range definitionOf(def) {
				whole[k] = s
			}
		}
	}
	maps.Copy(whole, part)
	patchOf := func(ann map[string]any) []byte {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
		return b
	}
	written := map[types.UID]bool{}
	for pass := range 2 {
		for _, vm := range vms {
			if written[vm.UID] {
				continue
			}
			patch := patchOf(part)
			if carriesEncoded(&vm) {
				patch = patchOf(whole)
			}
			// A member gone since it was listed (a reset deleted it) has
			// nothing to carry; its clone reads the others when done.
			if err := v.patchVM(ctx, namespace, vm.Name, patch); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("kube: set %s on VM %s/%s: %w", what, namespace, vm.Name, err)
			}
			written[vm.UID] = true
		}
		if pass == 0 {
			if vms, err = v.liveList(ctx, namespace, name); err != nil {
				return err
			}
		}
	}
	return nil
}
