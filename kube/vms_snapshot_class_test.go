package kube

import (
	"strings"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestSnapshotClassFor picks VolumeSnapshotClasses as KubeVirt's snapshot
// controller does, and refuses, naming the fix, where KubeVirt would fail
// or leave the disk out.
func TestSnapshotClassFor(t *testing.T) {
	vsc := func(name, driver, policy string, isDefault bool) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
			"metadata": map[string]any{"name": name}, "driver": driver, "deletionPolicy": policy}}
		if isDefault {
			u.SetAnnotations(map[string]string{annDefaultSnapshotClass: "true"})
		}
		return u
	}
	sc := &storagev1.StorageClass{Provisioner: "ebs.csi.aws.com"}
	sc.Name = "gp3"
	for _, tc := range []struct {
		name     string
		classes  []unstructured.Unstructured
		profiles map[string]string
		want     SnapshotClass
		refusal  string // in the message; the hint names a fix
	}{
		{"one", []unstructured.Unstructured{vsc("ebs", "ebs.csi.aws.com", "Delete", false), vsc("other", "x", "Delete", false)}, nil,
			SnapshotClass{Name: "ebs"}, ""},
		{"none", []unstructured.Unstructured{vsc("other", "x", "Delete", false)}, nil, SnapshotClass{}, "has no VolumeSnapshotClass"},
		{"several with a default", []unstructured.Unstructured{vsc("a", "ebs.csi.aws.com", "Delete", false), vsc("b", "ebs.csi.aws.com", "Retain", true)}, nil,
			SnapshotClass{Name: "b", Retain: true}, ""},
		{"several without a default", []unstructured.Unstructured{vsc("a", "ebs.csi.aws.com", "Delete", false), vsc("b", "ebs.csi.aws.com", "Delete", false)}, nil,
			SnapshotClass{}, "has 2 VolumeSnapshotClasses (a, b) and none is the default"},
		{"StorageProfile first", []unstructured.Unstructured{vsc("a", "ebs.csi.aws.com", "Delete", true), vsc("fast", "other.driver", "Delete", false)},
			map[string]string{"gp3": "fast"}, SnapshotClass{Name: "fast"}, ""},
		{"StorageProfile names a missing class", []unstructured.Unstructured{vsc("a", "ebs.csi.aws.com", "Delete", true)},
			map[string]string{"gp3": "gone"}, SnapshotClass{}, "names VolumeSnapshotClass gone, which does not exist"},
	} {
		s := &SnapshotClasses{classes: tc.classes, profiles: tc.profiles}
		got, err := s.SnapshotClassFor(sc)
		if tc.refusal == "" {
			if err != nil || got != tc.want {
				t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
			}
			continue
		}
		if e, ok := err.(*vdi.Error); !ok || e.Code != vdi.EInvalid || !strings.Contains(e.Msg, tc.refusal) || e.Hint == "" {
			t.Errorf("%s: %+v, %v; want EInvalid saying %q with a fix", tc.name, got, err, tc.refusal)
		}
	}
}
