package kube

import (
	"context"
	"fmt"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// KubeVirt's snapshot controller picks a disk's VolumeSnapshotClass as
// follows (pkg/storage/snapshot): the class CDI's StorageProfile of the
// disk's StorageClass names (status.snapshotClass) when there is one; else
// the one VolumeSnapshotClass whose driver is the StorageClass's
// provisioner; of several, the one annotated the default; several and no
// default is an error ("N matching VolumeSnapshotClasses"), and none leaves
// the disk out of the snapshot. The preflight picks the same way, so that
// it refuses what KubeVirt would fail on, with the fix named.

var storageProfileGVR = schema.GroupVersionResource{Group: "cdi.kubevirt.io", Version: "v1beta1", Resource: "storageprofiles"}

// annDefaultSnapshotClass marks a driver's default VolumeSnapshotClass.
const annDefaultSnapshotClass = "snapshot.storage.kubernetes.io/is-default-class"

// SnapshotClass is the VolumeSnapshotClass KubeVirt would snapshot a
// StorageClass's disks with.
type SnapshotClass struct {
	Name string
	// Retain says its deletionPolicy keeps the storage snapshot when the
	// VolumeSnapshot is deleted: every golden state's snapshot the portal
	// sweeps stays behind in the storage, billed, until someone deletes it.
	Retain bool
}

// SnapshotClasses reads the cluster's VolumeSnapshotClasses and CDI's
// StorageProfiles to pick classes as KubeVirt does (SnapshotClassFor).
type SnapshotClasses struct {
	classes  []unstructured.Unstructured
	profiles map[string]string // StorageClass -> the snapshot class its StorageProfile names
}

// ReadSnapshotClasses reads what SnapshotClassFor needs. A cluster with no
// VolumeSnapshot API has no classes; one without CDI no profiles.
func ReadSnapshotClasses(ctx context.Context, dyn dynamic.Interface) (*SnapshotClasses, error) {
	s := &SnapshotClasses{profiles: map[string]string{}}
	list, err := dyn.Resource(vscGVR).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("kube: list VolumeSnapshotClasses: %w", err)
	default:
		s.classes = list.Items
	}
	profiles, err := dyn.Resource(storageProfileGVR).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return nil, fmt.Errorf("kube: list CDI's StorageProfiles: %w", err)
	default:
		for _, p := range profiles.Items {
			if c, _, _ := unstructured.NestedString(p.Object, "status", "snapshotClass"); c != "" {
				s.profiles[p.GetName()] = c
			}
		}
	}
	return s, nil
}

// SnapshotClassFor returns the class KubeVirt would snapshot sc's disks
// with; a *vdi.Error naming the fix when it would leave them out or fail.
func (s *SnapshotClasses) SnapshotClassFor(sc *storagev1.StorageClass) (SnapshotClass, error) {
	if name := s.profiles[sc.Name]; name != "" {
		for _, c := range s.classes {
			if c.GetName() == name {
				return classOf(&c), nil
			}
		}
		return SnapshotClass{}, vdi.Errorf(vdi.EInvalid,
			fmt.Sprintf("Create VolumeSnapshotClass %s, or correct the StorageProfile's snapshotClass (kubectl edit storageprofile %s).", name, sc.Name),
			"CDI's StorageProfile %s names VolumeSnapshotClass %s, which does not exist: KubeVirt cannot snapshot disks on StorageClass %s.", sc.Name, name, sc.Name)
	}
	var matches []*unstructured.Unstructured
	for i := range s.classes {
		if d, _, _ := unstructured.NestedString(s.classes[i].Object, "driver"); d == sc.Provisioner {
			matches = append(matches, &s.classes[i])
		}
	}
	switch len(matches) {
	case 0:
		return SnapshotClass{}, vdi.Errorf(vdi.EInvalid,
			fmt.Sprintf("Create a VolumeSnapshotClass with driver %s (deletionPolicy Delete), or move the disk to a class that has one.", sc.Provisioner),
			"StorageClass %s's provisioner %s has no VolumeSnapshotClass: its disks cannot be snapshotted.", sc.Name, sc.Provisioner)
	case 1:
		return classOf(matches[0]), nil
	}
	var names []string
	for _, c := range matches {
		if _, ok := c.GetAnnotations()[annDefaultSnapshotClass]; ok {
			return classOf(c), nil
		}
		names = append(names, c.GetName())
	}
	return SnapshotClass{}, vdi.Errorf(vdi.EInvalid,
		fmt.Sprintf("Mark one the default: kubectl annotate volumesnapshotclass %s %s=true (or name one in CDI's StorageProfile %s).", names[0], annDefaultSnapshotClass, sc.Name),
		"StorageClass %s's provisioner %s has %d VolumeSnapshotClasses (%s) and none is the default: KubeVirt refuses to pick one.",
		sc.Name, sc.Provisioner, len(matches), strings.Join(names, ", "))
}

// classOf describes VolumeSnapshotClass c.
func classOf(c *unstructured.Unstructured) SnapshotClass {
	p, _, _ := unstructured.NestedString(c.Object, "deletionPolicy")
	return SnapshotClass{Name: c.GetName(), Retain: p == "Retain"}
}
