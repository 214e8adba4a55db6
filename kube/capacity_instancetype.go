package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A golden VM may take its devices from an instancetype
// (spec.instancetype): KubeVirt adds the instancetype's GPUs and host
// devices to every VMI of the VM, so capacity admission counts them with
// the template's.
//
// KubeVirt applies the copy of the instancetype it stored in a
// ControllerRevision when it first saw the VM (status.instancetypeRef
// .controllerRevisionRef, or spec.instancetype.revisionName), not the
// instancetype as it is now, and a clone's restore carries that revision
// to the member: so the revision is read when there is one, the live
// instancetype only before KubeVirt has stored it.

// kindClusterInstancetype is the kind of an InstancetypeMatcher with none.
const kindClusterInstancetype = "VirtualMachineClusterInstancetype"

// instancetypeDemand returns the host devices golden's instancetype gives
// each VM, by resource; none without an instancetype.
func (v *VMs) instancetypeDemand(ctx context.Context, golden *kubevirtv1.VirtualMachine) (map[corev1.ResourceName]int64, error) {
	m := golden.Spec.Instancetype
	if m == nil || m.Name == "" {
		return nil, nil
	}
	path := "/apis/" + instancetypev1beta1.SchemeGroupVersion.String()
	// KubeVirt matches the kind lowercased, singular or plural
	// (pkg/instancetype/find/spec.go).
	switch strings.ToLower(m.Kind) {
	case "", "virtualmachineclusterinstancetype", "virtualmachineclusterinstancetypes":
		path += "/virtualmachineclusterinstancetypes/" + url.PathEscape(m.Name)
	case "virtualmachineinstancetype", "virtualmachineinstancetypes":
		path += "/namespaces/" + url.PathEscape(golden.Namespace) + "/virtualmachineinstancetypes/" + url.PathEscape(m.Name)
	default:
		return nil, vdi.Errorf(vdi.EInvalid, "Use a VirtualMachineInstancetype or VirtualMachineClusterInstancetype.",
			"Golden VM %s/%s names an instancetype of kind %q.", golden.Namespace, golden.Name, m.Kind)
	}
	raw, err := v.instancetypeRevision(ctx, golden)
	if err != nil {
		return nil, err
	}
	if raw == nil {
		raw, err = v.rest.Get().AbsPath(path).Do(ctx).Raw()
	}
	if apierrors.IsNotFound(err) {
		return nil, vdi.Errorf(vdi.EInvalid, "Create it, or clone from a golden VM whose instancetype exists; no member could start without it.",
			"Golden VM %s/%s's instancetype %s %s is not found.", golden.Namespace, golden.Name, kindOr(m.Kind), m.Name)
	} else if err != nil {
		return nil, capacityReadError(vdi.Ref{Namespace: golden.Namespace, Name: golden.Name}, "instancetypes", fmt.Errorf("%s %s: %w", kindOr(m.Kind), m.Name, err))
	}
	// Both kinds share the spec.
	var it instancetypev1beta1.VirtualMachineInstancetype
	if err := json.Unmarshal(raw, &it); err != nil {
		return nil, fmt.Errorf("kube: instancetype %s: %w", m.Name, err)
	}
	out := map[corev1.ResourceName]int64{}
	for _, g := range it.Spec.GPUs {
		if g.DeviceName != "" {
			out[corev1.ResourceName(g.DeviceName)]++
		}
	}
	for _, h := range it.Spec.HostDevices {
		if h.DeviceName != "" {
			out[corev1.ResourceName(h.DeviceName)]++
		}
	}
	return out, nil
}

// instancetypeRevision returns the instancetype KubeVirt stored for
// golden, as JSON; nil when it stored none (yet).
func (v *VMs) instancetypeRevision(ctx context.Context, golden *kubevirtv1.VirtualMachine) ([]byte, error) {
	name := golden.Spec.Instancetype.RevisionName
	if ref := golden.Status.InstancetypeRef; ref != nil && ref.ControllerRevisionRef != nil && ref.ControllerRevisionRef.Name != "" {
		name = ref.ControllerRevisionRef.Name
	}
	if name == "" {
		return nil, nil
	}
	cr, err := v.apps.ControllerRevisions(golden.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("kube: the instancetype revision %s/%s of golden VM %s (deploy/rbac.yaml grants get on controllerrevisions): %w", golden.Namespace, name, golden.Name, err)
	}
	return cr.Data.Raw, nil
}

func kindOr(kind string) string {
	if kind == "" {
		return kindClusterInstancetype
	}
	return kind
}
