package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// AnnotationClaimedAt is when the member's claim began (RFC 3339), on the VM.
const AnnotationClaimedAt = "corral.dev/vdi-claimed-at"

var _ vdi.ClaimMirror = (*VMs)(nil)

// MirrorClaim shows the claim on the VM for kubectl users: the label
// vdi.LabelAssignedTo (the holder made a valid label value, for -l
// selectors), an annotation of the same name with the exact holder, and
// AnnotationClaimedAt. An empty holder removes all three. The Lease stays
// the truth; this is presentation.
func (v *VMs) MirrorClaim(ctx context.Context, ref vdi.Ref, holder string, claimedAt time.Time) error {
	var label, ann, at any // nil removes
	if holder != "" {
		label, ann, at = labelValue(holder), holder, claimedAt.UTC().Format(time.RFC3339)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{vdi.LabelAssignedTo: label},
		"annotations": map[string]any{vdi.LabelAssignedTo: ann, AnnotationClaimedAt: at},
	}})
	if err != nil {
		return err
	}
	err = v.rest.Patch(types.MergePatchType).Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).
		Body(patch).Do(ctx).Error()
	if apierrors.IsNotFound(err) {
		return vdi.Errorf(vdi.ENotFound, "It may have been deleted; release it and get another.", "No desktop %s.", ref)
	} else if err != nil {
		return fmt.Errorf("kube: label VM %s as %s's: %w", ref, holder, err)
	}
	return nil
}

// labelValue turns s into a valid label value: at most 63 of
// [A-Za-z0-9._-], starting and ending with a letter or digit.
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "._-")
}
