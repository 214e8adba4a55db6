package testcluster

import (
	"context"
	"log"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// The StorageClasses CSIDriver serves: the first two of driver
// CSIDriverName, which has a VolumeSnapshotClass; the last of a driver
// that has none (storage that cannot snapshot: KubeVirt finds a class's
// VolumeSnapshotClass by its provisioner).
const (
	CSIDriverName       = "csi.corral.test"
	CSIDriverNoSnap     = "nosnap.corral.test"
	StorageClassDefault = "corral-csi"      // Immediate binding, snapshots
	StorageClassWFFC    = "corral-csi-wffc" // WaitForFirstConsumer, snapshots
	StorageClassNoSnap  = "corral-nosnap"   // Immediate binding, no VolumeSnapshotClass
	VolumeSnapshotClass = "corral-csi"
)

// AnnSelectedNode is what the scheduler writes on a WaitForFirstConsumer
// PVC once a Pod that uses it is placed: only then is it provisioned.
const AnnSelectedNode = "volume.kubernetes.io/selected-node"

var (
	gvrSnapshots        = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}
	gvrSnapshotContents = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotcontents"}
	gvrSnapshotClasses  = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}
)

// CSIDriver is a TEST-ONLY CSI driver with its sidecars, the part of the
// storage that needs hardware: it provisions and binds PVCs of its classes
// (at once, or for WaitForFirstConsumer once AnnSelectedNode is set), a
// PVC restored from a VolumeSnapshot only while that snapshot exists and is
// ready (as external-provisioner), and cuts the snapshots the real
// snapshot-controller asks for (VolumeSnapshotContent readyToUse, as
// csi-snapshotter). Its volumes hold no data.
type CSIDriver struct {
	core kubernetes.Interface
	dyn  dynamic.Interface
	stop context.CancelFunc
	done chan struct{}

	mu           sync.Mutex
	bindDelay    time.Duration // how long a new PVC waits to be bound
	snapshotTime time.Duration // how long a new snapshot takes to be cut
}

// SetDelays makes the driver as slow as cloud storage: a PVC is bound no
// sooner than bind after it was made (CreateVolume of a disk, or of a
// disk restored from a snapshot, takes that long), and a snapshot is
// readyToUse no sooner than snapshot after its content was made (the
// provider's snapshot upload). Zero is at once.
func (d *CSIDriver) SetDelays(bind, snapshot time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.bindDelay, d.snapshotTime = bind, snapshot
}

// delays returns SetDelays' values.
func (d *CSIDriver) delays() (bind, snapshot time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.bindDelay, d.snapshotTime
}

// StartCSIDriver creates the StorageClasses and VolumeSnapshotClass and
// runs the driver until tb ends. It needs the snapshotter's CRDs
// (StartKubeVirt installs them).
func (c *Cluster) StartCSIDriver(tb testing.TB) *CSIDriver {
	tb.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		tb.Fatal(err)
	}
	immediate, wffc := storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer
	del := corev1.PersistentVolumeReclaimDelete
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: StorageClassDefault}, Provisioner: CSIDriverName, VolumeBindingMode: &immediate, ReclaimPolicy: &del},
		{ObjectMeta: metav1.ObjectMeta{Name: StorageClassWFFC}, Provisioner: CSIDriverName, VolumeBindingMode: &wffc, ReclaimPolicy: &del},
		{ObjectMeta: metav1.ObjectMeta{Name: StorageClassNoSnap}, Provisioner: CSIDriverNoSnap, VolumeBindingMode: &immediate, ReclaimPolicy: &del},
	} {
		if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			tb.Fatalf("testcluster: create StorageClass %s: %v", sc.Name, err)
		}
	}
	vsc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": VolumeSnapshotClass}, "driver": CSIDriverName, "deletionPolicy": "Delete",
	}}
	if _, err := dyn.Resource(gvrSnapshotClasses).Create(ctx, vsc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		tb.Fatalf("testcluster: create VolumeSnapshotClass %s: %v", VolumeSnapshotClass, err)
	}
	ctx, stop := context.WithCancel(ctx)
	d := &CSIDriver{core: c.Client, dyn: dyn, stop: stop, done: make(chan struct{})}
	go d.loop(ctx)
	tb.Cleanup(func() { d.stop(); <-d.done })
	return d
}

func (d *CSIDriver) loop(ctx context.Context) {
	defer close(d.done)
	for {
		d.bindClaims(ctx)
		d.cutSnapshots(ctx)
		d.reclaim(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (d *CSIDriver) logf(format string, args ...any) {
	log.Printf("testcluster: CSI driver: "+format, args...)
}

// bindClaims provisions a PV for every Pending PVC of the driver's classes
// that may be provisioned now, and binds the two.
func (d *CSIDriver) bindClaims(ctx context.Context) {
	pvcs, err := d.core.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	bindDelay, _ := d.delays()
	for i := range pvcs.Items {
		pvc := &pvcs.Items[i]
		if pvc.Status.Phase == corev1.ClaimBound || pvc.DeletionTimestamp != nil || pvc.Spec.StorageClassName == nil {
			continue
		}
		if time.Since(pvc.CreationTimestamp.Time) < bindDelay {
			continue // the volume is still being made
		}
		sc, err := d.core.StorageV1().StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
		if err != nil || sc.Provisioner != CSIDriverName && sc.Provisioner != CSIDriverNoSnap {
			continue
		}
		if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingWaitForFirstConsumer && pvc.Annotations[AnnSelectedNode] == "" {
			continue
		}
		if src := pvc.Spec.DataSource; src != nil && src.Kind == "VolumeSnapshot" && !d.snapshotReady(ctx, pvc.Namespace, src.Name) {
			continue // external-provisioner retries until the snapshot is there
		}
		if err := d.bind(ctx, pvc, sc); err != nil && ctx.Err() == nil {
			d.logf("bind %s/%s: %v", pvc.Namespace, pvc.Name, err)
		}
	}
}

// snapshotReady reports whether the VolumeSnapshot exists and is ready.
func (d *CSIDriver) snapshotReady(ctx context.Context, ns, name string) bool {
	vs, err := d.dyn.Resource(gvrSnapshots).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || vs.GetDeletionTimestamp() != nil {
		return false
	}
	ready, _, _ := unstructured.NestedBool(vs.Object, "status", "readyToUse")
	return ready
}

func (d *CSIDriver) bind(ctx context.Context, pvc *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass) error {
	size := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if size.IsZero() {
		size = resource.MustParse("1Gi")
	}
	name := "pvc-" + string(pvc.UID)
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": CSIDriverName}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   pvc.Spec.AccessModes,
			VolumeMode:                    pvc.Spec.VolumeMode,
			StorageClassName:              *pvc.Spec.StorageClassName,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: sc.Provisioner, VolumeHandle: name}},
		},
	}
	if _, err := d.core.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	pv, err := d.core.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	pv.Status.Phase = corev1.VolumeBound
	if _, err := d.core.CoreV1().PersistentVolumes().UpdateStatus(ctx, pv, metav1.UpdateOptions{}); err != nil {
		return err
	}
	pvc.Spec.VolumeName = name
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
	pvc, err = d.core.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	pvc.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, AccessModes: pv.Spec.AccessModes, Capacity: pv.Spec.Capacity}
	_, err = d.core.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(ctx, pvc, metav1.UpdateOptions{})
	return err
}

// cutSnapshots makes ready every VolumeSnapshotContent of the driver that
// has no status yet, as csi-snapshotter does once CreateSnapshot returns.
func (d *CSIDriver) cutSnapshots(ctx context.Context) {
	list, err := d.dyn.Resource(gvrSnapshotContents).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	_, snapshotTime := d.delays()
	for i := range list.Items {
		vsc := &list.Items[i]
		driver, _, _ := unstructured.NestedString(vsc.Object, "spec", "driver")
		if driver != CSIDriverName || vsc.GetDeletionTimestamp() != nil {
			continue
		}
		if time.Since(vsc.GetCreationTimestamp().Time) < snapshotTime {
			continue // the provider is still cutting it
		}
		if ready, _, _ := unstructured.NestedBool(vsc.Object, "status", "readyToUse"); ready {
			continue
		}
		size := int64(1 << 30)
		_ = unstructured.SetNestedField(vsc.Object, map[string]any{
			"readyToUse": true, "snapshotHandle": "snap-" + string(vsc.GetUID()),
			"creationTime": time.Now().UnixNano(), "restoreSize": size,
		}, "status")
		if _, err := d.dyn.Resource(gvrSnapshotContents).UpdateStatus(ctx, vsc, metav1.UpdateOptions{}); err != nil && ctx.Err() == nil && !apierrors.IsConflict(err) {
			d.logf("cut snapshot %s: %v", vsc.GetName(), err)
		}
	}
}

// reclaim deletes the driver's PVs whose claim is gone (reclaim policy
// Delete), as the PV controller and external-provisioner do.
func (d *CSIDriver) reclaim(ctx context.Context) {
	pvs, err := d.core.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pv := range pvs.Items {
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != CSIDriverName && pv.Spec.CSI.Driver != CSIDriverNoSnap || pv.Spec.ClaimRef == nil {
			continue
		}
		pvc, err := d.core.CoreV1().PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(ctx, pv.Spec.ClaimRef.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) || err == nil && pvc.UID != pv.Spec.ClaimRef.UID {
			_ = d.core.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
		}
	}
}
