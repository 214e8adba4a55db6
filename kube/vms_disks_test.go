package kube_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMPoolDisksGoWithMembers makes a pool from a golden VM with a disk
// from its dataVolumeTemplates and a plain PVC (whose restored copy
// KubeVirt leaves unowned; the stand-in too): every restored disk is its
// member's, so shrinking, recreating and deleting the pool leave none
// behind.
func TestVMPoolDisksGoWithMembers(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	s.c.InstallVolumeSnapshotAPI(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	// The golden disks are Bound on a class with a VolumeSnapshotClass, as
	// pool create's preflight wants; gold-root stands for the PVC CDI
	// makes for the DataVolume.
	class := "disks-csi"
	if err := admin.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: "csi.disks.example"}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	vsc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": class}, "driver": "csi.disks.example", "deletionPolicy": "Delete"}}
	if err := admin.Create(ctx, vsc); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, name := range []string{"gold-data", "gold-root"} {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: &class,
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
		if err := admin.Create(ctx, pvc); err != nil {
			t.Fatal(err)
		}
		bound := func(pvc *corev1.PersistentVolumeClaim) { pvc.Status.Phase = corev1.ClaimBound }
		if err := testcluster.UpdateStatus(ctx, admin, pvc, bound); err != nil {
			t.Fatal(err)
		}
	}
	halted := kubevirtv1.RunStrategyHalted
	golden := &kubevirtv1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "gold"},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &halted,
			DataVolumeTemplates: []kubevirtv1.DataVolumeTemplateSpec{{ObjectMeta: metav1.ObjectMeta{Name: "gold-root"}}},
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{Volumes: []kubevirtv1.Volume{
				{Name: "root", VolumeSource: kubevirtv1.VolumeSource{DataVolume: &kubevirtv1.DataVolumeSource{Name: "gold-root"}}},
				{Name: "data", VolumeSource: kubevirtv1.VolumeSource{PersistentVolumeClaim: &kubevirtv1.PersistentVolumeClaimVolumeSource{
					PersistentVolumeClaimVolumeSource: corev1.PersistentVolumeClaimVolumeSource{ClaimName: "gold-data"}}}},
			}}}}}
	if err := admin.Create(ctx, golden); err != nil {
		t.Fatal(err)
	}
	disks := func(want int, when string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			var list corev1.PersistentVolumeClaimList
			if err := admin.List(ctx, &list, client.InNamespace(ns), client.HasLabels{testcluster.LabelRestoredDisk}); err != nil {
				t.Fatal(err)
			}
			unowned := 0
			for _, p := range list.Items {
				if len(p.OwnerReferences) == 0 || p.OwnerReferences[0].Kind != "VirtualMachine" {
					unowned++
				}
			}
			if len(list.Items) == want && unowned == 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d restored disks, %d of them owned by no VM; want %d, all their member's", when, len(list.Items), unowned, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := vms.CreatePool(ctx, vdi.Pool{Namespace: ns, Name: "disk", Kind: vdi.KindVM, Mode: vdi.ModeEphemeral, Source: "gold", Size: 3}); err != nil {
		t.Fatal(err)
	}
	disks(6, "after creating 3 members")
	var m kubevirtv1.VirtualMachine
	if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "disk-1"}, &m); err != nil ||
		!strings.HasPrefix(m.Spec.Template.Spec.Volumes[1].PersistentVolumeClaim.ClaimName, "restore-") {
		t.Fatalf("disk-1: %v, volumes %+v; want its own restored disks", err, m.Spec.Template)
	}
	if err := vms.ResizePool(ctx, ns, "disk", 1, func(string) bool { return false }); err != nil {
		t.Fatal(err)
	}
	disks(2, "after shrinking to 1")
	if err := vms.Recreate(ctx, vdi.Ref{Namespace: ns, Name: "disk-1"}); err != nil {
		t.Fatal(err)
	}
	disks(2, "after recreating the member")
	if err := vms.DeletePool(ctx, ns, "disk"); err != nil {
		t.Fatal(err)
	}
	disks(0, "after deleting the pool")
}
