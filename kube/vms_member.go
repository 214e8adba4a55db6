package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// A clone's spec.patches go into the VirtualMachineRestore it makes, and
// KubeVirt's restore admission (pkg/storage/admitters/vmrestore.go,
// validatePatches, the same v1.5-v1.9) reads each patch as text: it trims
// `{}`, splits on `,` and each piece on `:`, wants exactly two parts per
// piece, and a path under /metadata/labels/…, /metadata/annotations/… or
// /spec/… only. So a member's labels and annotations go one key a patch,
// and only values with none of those characters; the rest (the JSON
// policy and access) are written on the VM once the clone is done.

// memberMeta is what makes a clone's target a pool member: labels and
// annotations on top of the golden VM's (which the restore copies).
type memberMeta struct {
	golden      *kubevirtv1.VirtualMachine
	labels      map[string]string
	annotations map[string]string
}

// patches returns the clone's JSON patches: one "add" per plain label and
// annotation, in key order. Labels go only where the golden VM has some
// (RFC 6902 "add" needs the labels map to exist, and the restore admission
// allows no patch of /metadata/labels itself); the restore always writes
// an annotation, so annotations always have a map.
func (m *memberMeta) patches() []string {
	if m == nil {
		return nil
	}
	var out []string
	add := func(base string, kv map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			if !plainPatchValue(k) || !plainPatchValue(kv[k]) {
				continue
			}
			b, _ := json.Marshal(map[string]string{"op": "add", "path": base + "/" + escapePointer(k), "value": kv[k]})
			out = append(out, string(b))
		}
	}
	if len(m.golden.Labels) > 0 {
		add("/metadata/labels", m.labels)
	}
	add("/metadata/annotations", m.annotations)
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

// writeMember writes meta's labels and annotations in full on the VM
// namespace/name: after its clone is done, or when taking over a clone
// another call started.
func (v *VMs) writeMember(ctx context.Context, namespace, name string, meta *memberMeta) error {
	if meta == nil {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": meta.labels, "annotations": meta.annotations}})
	if err := v.rest.Patch(types.MergePatchType).Namespace(namespace).Resource("virtualmachines").Name(name).Body(patch).Do(ctx).Error(); err != nil {
		return fmt.Errorf("kube: label cloned VM %s/%s as a pool member: %w", namespace, name, err)
	}
	return nil
}
