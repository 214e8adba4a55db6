package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// What a pool create or grow checks before it snapshots anything, each
// refusal one line naming what to change: KubeVirt's Snapshot feature gate
// where a release needs it explicit (before v1.9), and every golden disk
// Bound and on a StorageClass with a VolumeSnapshotClass (otherwise the
// snapshot leaves the disk out, or never finishes). `doctor` runs the same
// checks (portal/doctor_kubevirt.go).

var vscGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshotclasses"}

// SnapshotGate checks that KubeVirt snapshots, clones and restores are on:
// KubeVirt before v1.9 needs the Snapshot feature gate in its KubeVirt
// CR. It returns the KubeVirt version it found ("" when no KubeVirt CR can
// be read: nothing is refused then).
func (v *VMs) SnapshotGate(ctx context.Context) (string, error) {
	var list kubevirtv1.KubeVirtList
	if err := v.rest.Get().Resource("kubevirts").Do(ctx).Into(&list); err != nil || len(list.Items) == 0 {
		return "", nil
	}
	kv := &list.Items[0]
	version := kv.Status.ObservedKubeVirtVersion
	if !snapshotGateExplicit(version) {
		return version, nil
	}
	var gates []string
	if dc := kv.Spec.Configuration.DeveloperConfiguration; dc != nil {
		gates = dc.FeatureGates
	}
	if slices.Contains(gates, "Snapshot") {
		return version, nil
	}
	hint := fmt.Sprintf("Add Snapshot to spec.configuration.developerConfiguration.featureGates of KubeVirt %s/%s (kubectl edit kubevirt -n %s %s).", kv.Namespace, kv.Name, kv.Namespace, kv.Name)
	if kv.Labels[labelManagedBy] == hcoManager {
		// The HyperConverged Cluster Operator (OpenShift Virtualization,
		// namespace openshift-cnv) writes the KubeVirt CR back: an edit
		// there is undone at once.
		hint = fmt.Sprintf(`KubeVirt %s/%s is managed by the HyperConverged Cluster Operator, which undoes edits to it: set the gate through the HyperConverged CR instead, `+
			`e.g. kubectl annotate hyperconverged -n %s kubevirt-hyperconverged kubevirt.kubevirt.io/jsonpatch='[{"op":"add","path":"/spec/configuration/developerConfiguration/featureGates/-","value":"Snapshot"}]'.`,
			kv.Namespace, kv.Name, kv.Namespace)
	}
	return version, vdi.Errorf(vdi.EInvalid, hint, "KubeVirt %s clones golden VMs only with its Snapshot feature gate, which is off.", version)
}

// The label the HyperConverged Cluster Operator puts on the KubeVirt CR it
// manages.
const (
	labelManagedBy = "app.kubernetes.io/managed-by"
	hcoManager     = "hco-operator"
)

// snapshotGateExplicit reports whether KubeVirt version (vMAJOR.MINOR…)
// needs the Snapshot feature gate set: every release before v1.9.
func snapshotGateExplicit(version string) bool {
	major, rest, ok := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	if !ok {
		return false
	}
	minor, _, _ := strings.Cut(rest, ".")
	ma, err1 := strconv.Atoi(major)
	mi, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return false
	}
	return ma < 1 || ma == 1 && mi < 9
}

// GoldenDisks checks that every PVC of the golden VM is there, Bound, and
// on a StorageClass that KubeVirt can snapshot (SnapshotClassFor), and
// returns the VolumeSnapshotClasses its snapshots would use.
func (v *VMs) GoldenDisks(ctx context.Context, golden *kubevirtv1.VirtualMachine) ([]SnapshotClass, error) {
	ns := golden.Namespace
	var classes *SnapshotClasses
	var out []SnapshotClass
	for _, claim := range claimsOf(golden) {
		pvc, err := v.addrs.core.PersistentVolumeClaims(ns).Get(ctx, claim, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil, vdi.Errorf(vdi.EInvalid, "Create the PVC (or let the golden VM's DataVolume make it), then try again.",
				"Golden VM %s/%s's disk PVC %s does not exist.", ns, golden.Name, claim)
		} else if err != nil {
			return nil, fmt.Errorf("kube: golden disk %s/%s: %w", ns, claim, err)
		}
		if pvc.Status.Phase != corev1.ClaimBound {
			return nil, vdi.Errorf(vdi.EInvalid, "Start the golden VM once (a WaitForFirstConsumer class binds its disk then), stop it, and try again.",
				"Golden VM %s/%s's disk PVC %s is %s, not Bound: a snapshot would leave it out.", ns, golden.Name, claim, phaseOr(pvc.Status.Phase))
		}
		class := ""
		if pvc.Spec.StorageClassName != nil {
			class = *pvc.Spec.StorageClassName
		}
		if class == "" {
			return nil, vdi.Errorf(vdi.EInvalid, "Move the disk to a CSI StorageClass that has a VolumeSnapshotClass.",
				"Golden VM %s/%s's disk PVC %s has no StorageClass: it cannot be snapshotted.", ns, golden.Name, claim)
		}
		sc, err := v.storage.StorageClasses().Get(ctx, class, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("kube: StorageClass %s of golden disk %s/%s: %w", class, ns, claim, err)
		}
		if classes == nil {
			if classes, err = ReadSnapshotClasses(ctx, v.dyn); err != nil {
				return nil, err
			}
		}
		c, err := classes.SnapshotClassFor(sc)
		if err != nil {
			var e *vdi.Error
			if errors.As(err, &e) {
				e.Msg = fmt.Sprintf("Golden VM %s/%s's disk PVC %s: %s", ns, golden.Name, claim, e.Msg)
			}
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// GoldenVM returns the golden VM namespace/name; ENotFound when it is not there.
func (v *VMs) GoldenVM(ctx context.Context, namespace, name string) (*kubevirtv1.VirtualMachine, error) {
	return v.golden(ctx, namespace, name)
}

// preflight is what a pool create or grow checks of KubeVirt and the
// golden VM before it snapshots anything.
func (v *VMs) preflight(ctx context.Context, golden *kubevirtv1.VirtualMachine) error {
	if _, err := v.SnapshotGate(ctx); err != nil {
		return err
	}
	_, err := v.GoldenDisks(ctx, golden)
	return err
}

func phaseOr(p corev1.PersistentVolumeClaimPhase) string {
	if p == "" {
		return "Pending"
	}
	return string(p)
}
