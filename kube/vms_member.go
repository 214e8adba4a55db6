package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A clone's spec.patches go into the VirtualMachineRestore it makes, and
// KubeVirt's restore admission (pkg/storage/admitters/vmrestore.go,
// validatePatches, the same v1.5-v1.9) reads each patch as text: it trims
// `{}`, splits on `,` and each piece on `:`, wants exactly two parts per
// piece, and a path under /metadata/labels/…, /metadata/annotations/… or
// /spec/… only. So a member's labels and annotations go one key a patch,
// and only values with none of those characters; annotation values with
// them (the JSON policy and access) go encoded (encodeValue), so that a
// clone is a member of its pool, with its pool's definition, from its
// first moment; they are written as plain JSON once the clone is seen done.

// memberMeta is what makes a clone's target a pool member: labels and
// annotations on top of the golden VM's (which the restore copies). The
// portal's own keys (portalPrefix) come from the pool alone: those the
// golden VM carries are removed, so that whoever may edit a golden VM
// cannot grant its members access, a policy, a licence acknowledgement or
// a session state.
type memberMeta struct {
	golden      *kubevirtv1.VirtualMachine
	labels      map[string]string
	annotations map[string]string
}

// pool returns the pool m makes its VM a member of ("" for none).
func (m *memberMeta) pool() string {
	if m == nil {
		return ""
	}
	return m.labels[vdi.LabelPool]
}

// portalPrefix starts the labels and annotations the portal owns.
const portalPrefix = "corral.dev/vdi-"

// patches returns the clone's JSON patches: a "remove" per portal key of
// the golden VM the member does not set, then one "add" per plain label and
// annotation, in key order. Labels go only where the golden VM has some
// (see LabelGolden); the restore always writes an annotation, so
// annotations always have a map.
func (m *memberMeta) patches() []string {
	if m == nil {
		return nil
	}
	var out []string
	remove := func(base string, golden, member map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(golden)) {
			if _, ok := member[k]; !ok && strings.HasPrefix(k, portalPrefix) && plainPatchValue(k) {
				b, _ := json.Marshal(map[string]string{"op": "remove", "path": base + "/" + escapePointer(k)})
				out = append(out, string(b))
			}
		}
	}
	remove("/metadata/labels", m.golden.Labels, m.labels)
	remove("/metadata/annotations", m.golden.Annotations, m.annotations)
	add := func(base string, kv map[string]string, encode bool) {
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			v := kv[k]
			if !plainPatchValue(v) && encode {
				v = encodeValue(v)
			}
			if !plainPatchValue(k) || !plainPatchValue(v) {
				continue
			}
			b, _ := json.Marshal(map[string]string{"op": "add", "path": base + "/" + escapePointer(k), "value": v})
			out = append(out, string(b))
		}
	}
	if len(m.golden.Labels) > 0 {
		add("/metadata/labels", m.labels, false)
	}
	add("/metadata/annotations", m.annotations, true)
	return out
}

// plainPatchValue reports whether s survives the restore admission's
// text split: no `,` `:` `{` `}`.
func plainPatchValue(s string) bool {
	return !strings.ContainsAny(s, ",:{}")
}

// escapePointer escapes a map key as one RFC 6901 JSON pointer token.
func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// LabelGolden marks a golden VM that had no labels when a pool was cloned
// from it: RFC 6902 "add" of a label needs the labels map, and KubeVirt's
// restore admission allows no patch of /metadata/labels itself, so the
// golden VM (whose labels the restore copies) must have one. Members do
// not keep it (it is a portal key).
const LabelGolden = "corral.dev/vdi-golden"

// labelGolden gives golden a label when it has none; see LabelGolden.
func (v *VMs) labelGolden(ctx context.Context, golden *kubevirtv1.VirtualMachine) error {
	if len(golden.Labels) > 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{LabelGolden: "true"}}})
	var out kubevirtv1.VirtualMachine
	if err := v.rest.Patch(types.MergePatchType).Namespace(golden.Namespace).Resource("virtualmachines").Name(golden.Name).Body(patch).Do(ctx).Into(&out); err != nil {
		return fmt.Errorf("kube: label golden VM %s/%s %s (clones need a labels map to add the pool's label to): %w", golden.Namespace, golden.Name, LabelGolden, err)
	}
	*golden = out
	return nil
}

// writeMember writes meta's labels and annotations in full on the VM
// namespace/name, and removes the portal keys it copied from the golden VM:
// after its clone is done, or when taking over a clone another call
// started. The pool's definition it writes is the one the pool's other
// members carry now (currentDefinition): an admin who changed it while the
// clone was made (a reset's re-clone takes minutes) wrote it on them, not
// on a VM that was not there yet. The write is conditional on the VM as
// read with them, so that a definition written on it meanwhile is read
// again, never overwritten with an older one.
//
// A write that loses (Conflict) or meets a passing fault of the API server
// is tried again, with backoff up to memberWriteBackoff, for as long as
// ctx lives (the job's): a member is never given up on while its job
// goes on. Until the write lands the member carries the definition its
// clone was planned with (encoded, see memberMeta), which counts only
// where it agrees with the pool's and else closes the member
// (closedMembers); the reclaim loop writes the pool's on it
// (RepairDefinitions) if the job ends first.
func (v *VMs) writeMember(ctx context.Context, namespace, name string, meta *memberMeta) error {
	if meta == nil {
		return nil
	}
	merge := func(golden, member map[string]string) map[string]any {
		out := map[string]any{}
		for k := range golden {
			if strings.HasPrefix(k, portalPrefix) {
				out[k] = nil
			}
		}
		for k, v := range member {
			out[k] = v
		}
		return out
	}
	write := func() error {
		ann, version, err := v.currentDefinition(ctx, namespace, name, meta)
		if err != nil {
			return err
		}
		annotations := merge(meta.golden.Annotations, ann)
		for _, k := range definitionKeys {
			if _, ok := ann[k]; !ok {
				annotations[k] = nil // not part of the pool's definition now
			}
		}
		md := map[string]any{"labels": merge(meta.golden.Labels, meta.labels), "annotations": annotations}
		if version != "" {
			md["resourceVersion"] = version // a precondition: Conflict if written meanwhile
		}
		patch, _ := json.Marshal(map[string]any{"metadata": md})
		return v.patchVM(ctx, namespace, name, patch)
	}
	wait := memberWriteFirst
	for lost := 0; ; lost++ {
		err := write()
		if err == nil {
			return nil
		}
		stopped := func() error {
			return fmt.Errorf("kube: label cloned VM %s/%s as a pool member: stopped after %d tries (it carries the definition its clone was planned with until the reclaim loop writes the pool's): %w (last: %v)",
				namespace, name, lost+1, context.Cause(ctx), err)
		}
		if ctx.Err() != nil {
			return stopped()
		}
		if !retryable(err) {
			return fmt.Errorf("kube: label cloned VM %s/%s as a pool member: %w", namespace, name, err)
		}
		select {
		case <-ctx.Done():
			return stopped()
		case <-time.After(wait/2 + rand.N(wait)):
		}
		wait = min(2*wait, memberWriteBackoff)
	}
}

// memberWriteFirst and memberWriteBackoff bound the wait between tries of
// a member's write (writeMember): it doubles from the first to the second.
const (
	memberWriteFirst   = 10 * time.Millisecond
	memberWriteBackoff = time.Second
)

// retryable reports whether a write that failed with err may succeed if
// tried again: it lost a race (Conflict), or the API server or its
// storage was briefly away or too busy.
func retryable(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err)
}

// patchVM merge-patches VM namespace/name; reads of the namespace then see
// the patch (the cache is bypassed until it shows it).
func (v *VMs) patchVM(ctx context.Context, namespace, name string, patch []byte) error {
	var out kubevirtv1.VirtualMachine
	if err := v.rest.Patch(types.MergePatchType).Namespace(namespace).Resource("virtualmachines").Name(name).Body(patch).Do(ctx).Into(&out); err != nil {
		return err
	}
	v.cache.wrote(&out)
	return nil
}
