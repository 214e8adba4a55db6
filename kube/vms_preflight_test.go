package kube

import (
	"strings"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestSnapshotGateExplicit(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"v1.5.0", true}, {"v1.7.0", true}, {"v1.8.2", true}, {"v0.59.0", true},
		{"v1.9.0", false}, {"v1.10.1", false}, {"v2.0.0", false},
		{"", false}, {"unknown", false}, {"v1", false},
	} {
		if got := snapshotGateExplicit(tc.version); got != tc.want {
			t.Errorf("snapshotGateExplicit(%q) = %v; want %v", tc.version, got, tc.want)
		}
	}
}

// TestMemberPatchesPassRestoreAdmission checks every patch against the
// rule of KubeVirt's restore admission (pkg/storage/admitters/vmrestore.go,
// validatePatches), with values an attacker or a pool may choose; the
// real webhook runs in TestVMPoolOnKubeVirt.
func TestMemberPatchesPassRestoreAdmission(t *testing.T) {
	golden := &kubevirtv1.VirtualMachine{}
	golden.Labels = map[string]string{"app": "x", "corral.dev/vdi-assigned-to": "mallory"}
	golden.Annotations = map[string]string{"corral.dev/vdi-licenses-acknowledged": "true", "note": `{"a":1}`}
	m := &memberMeta{golden: golden, labels: map[string]string{"corral.dev/vdi-pool": "p"},
		annotations: map[string]string{"corral.dev/vdi-policy": `{"disconnectGrace":1}`, "corral.dev/vdi-mode": "ephemeral",
			"corral.dev/vdi-standby": `2","path":"/metadata/name`}}
	patches := m.patches()
	for _, p := range patches {
		for piece := range strings.SplitSeq(strings.Trim(p, "{}"), ",") {
			kv := strings.Split(piece, ":")
			if len(kv) != 2 {
				t.Errorf("patch %s: piece %q has %d parts; KubeVirt wants 2", p, piece, len(kv))
				continue
			}
			if strings.TrimSpace(kv[0]) == `"path"` {
				v := strings.TrimSpace(kv[1])
				if !strings.HasPrefix(v, `"/metadata/labels/`) && !strings.HasPrefix(v, `"/metadata/annotations/`) && !strings.HasPrefix(v, `"/spec/`) {
					t.Errorf("patch %s: path %s is not one KubeVirt allows", p, v)
				}
			}
		}
	}
	want := []string{
		`{"op":"remove","path":"/metadata/labels/corral.dev~1vdi-assigned-to"}`,
		`{"op":"remove","path":"/metadata/annotations/corral.dev~1vdi-licenses-acknowledged"}`,
		`{"op":"add","path":"/metadata/labels/corral.dev~1vdi-pool","value":"p"}`,
		`{"op":"add","path":"/metadata/annotations/corral.dev~1vdi-mode","value":"ephemeral"}`,
		// JSON values travel encoded, so the member has its pool's
		// definition from its first moment; a value made to smuggle a
		// patch stays one value.
		`{"op":"add","path":"/metadata/annotations/corral.dev~1vdi-policy","value":"base64url.eyJkaXNjb25uZWN0R3JhY2UiOjF9"}`,
		`{"op":"add","path":"/metadata/annotations/corral.dev~1vdi-standby","value":"base64url.MiIsInBhdGgiOiIvbWV0YWRhdGEvbmFtZQ"}`,
	}
	if strings.Join(patches, "\n") != strings.Join(want, "\n") {
		t.Errorf("patches:\n%s\nwant:\n%s", strings.Join(patches, "\n"), strings.Join(want, "\n"))
	}
}
