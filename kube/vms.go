package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	appsv1client "k8s.io/client-go/kubernetes/typed/apps/v1"
	storagev1client "k8s.io/client-go/kubernetes/typed/storage/v1"
	"k8s.io/client-go/rest"
	clonev1beta1 "kubevirt.io/api/clone/v1beta1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	snapshotv1beta1 "kubevirt.io/api/snapshot/v1beta1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Annotations on pool members (written when a pool is made) that describe
// their pool: there is no pool object, the members are the pool.
const (
	AnnotationMode   = "corral.dev/vdi-mode"   // persistent (default) or ephemeral
	AnnotationSource = "corral.dev/vdi-source" // the golden VM the member was cloned from
	AnnotationPolicy = "corral.dev/vdi-policy" // the pool's vdi.Policy as JSON
)

// VMs reads the KubeVirt VirtualMachines that make VM pools: the VMs
// labelled vdi.LabelPool, and powers them through the KubeVirt
// subresources; ephemeral members are cloned again from their golden VM.
// Its Dial is the direct path to a console (the VMI's IP);
// SubresourcePath is the way through the apiserver.
type VMs struct {
	rest      rest.Interface // kubevirt.io/v1
	sub       rest.Interface // subresources.kubevirt.io/v1
	clone     rest.Interface // clone.kubevirt.io/v1beta1
	snap      rest.Interface // snapshot.kubevirt.io/v1beta1
	snaps     sharedSnapshots
	addrs     *addresses // what the direct path may dial
	shots     screenshotSupport
	storage   storagev1client.StorageV1Interface
	apps      appsv1client.AppsV1Interface // instancetype ControllerRevisions
	dyn       dynamic.Interface            // VolumeSnapshotClasses
	namespace string
	cache     *watched // the labelled VMs, once StartCaches ran; nil reads the API server
	// Leases, when set (Config.Leases), are the claims: a member is
	// claimed for its removal before a shrink or a pool's deletion deletes
	// it, so that a claim made meanwhile wins (see takeFor).
	Leases vdi.Leases
}

// NewVMs returns VMs over cfg.REST, reading cfg.Namespace (all when
// empty), claiming in cfg.Leases.
func NewVMs(c Config) (*VMs, error) {
	cfg, namespace := c.REST, c.Namespace
	rc, err := kubevirtClient(cfg)
	if err != nil {
		return nil, err
	}
	sub, err := subresources(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: kubevirt subresources client: %w", err)
	}
	cl, err := crdClient(cfg, clonev1beta1.SchemeGroupVersion, clonev1beta1.AddToScheme)
	if err != nil {
		return nil, fmt.Errorf("kube: kubevirt clone client: %w", err)
	}
	sn, err := crdClient(cfg, snapshotv1beta1.SchemeGroupVersion, snapshotv1beta1.AddToScheme)
	if err != nil {
		return nil, fmt.Errorf("kube: kubevirt snapshot client: %w", err)
	}
	addrs, err := newAddresses(cfg, rc)
	if err != nil {
		return nil, fmt.Errorf("kube: core client: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: storage client: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: dynamic client: %w", err)
	}
	return &VMs{rest: rc, sub: sub, clone: cl, snap: sn, addrs: addrs, storage: cs.StorageV1(), apps: cs.AppsV1(), dyn: dyn, namespace: namespace,
		Leases: c.Leases}, nil
}

// kubevirtClient returns a REST client for kubevirt.io/v1.
func kubevirtClient(cfg *rest.Config) (rest.Interface, error) {
	rc, err := crdClient(cfg, kubevirtv1.GroupVersion, kubevirtv1.AddToScheme)
	if err != nil {
		return nil, fmt.Errorf("kube: kubevirt client: %w", err)
	}
	return rc, nil
}

// crdClient returns a REST client for gv, whose kinds add registers.
// KubeVirt's kinds are CRDs: JSON only, no protobuf.
func crdClient(cfg *rest.Config, gv schema.GroupVersion, add func(*runtime.Scheme) error) (rest.Interface, error) {
	scheme := runtime.NewScheme()
	if err := add(scheme); err != nil {
		return nil, err
	}
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	c.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	return rest.RESTClientFor(c)
}

// list returns the pool members in namespace (the configured one when
// empty), of pool when pool is not empty: from the cache when it serves
// reads, else from the API server.
func (v *VMs) list(ctx context.Context, namespace, pool string) ([]kubevirtv1.VirtualMachine, error) {
	if namespace == "" {
		namespace = v.namespace
	}
	var items []kubevirtv1.VirtualMachine
	if v.cache.missing() {
		return nil, apierrors.NewNotFound(kubevirtv1.Resource("virtualmachines"), "")
	}
	if st := v.cache.store(namespace); st != nil {
		items = cachedList[kubevirtv1.VirtualMachine](st, namespace, pool)
	} else {
		var err error
		if items, err = v.liveList(ctx, namespace, pool); err != nil {
			return nil, err
		}
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return items, nil
}

// liveList lists the member VMs of pool (every pool's when "") in
// namespace (every namespace when "") from the API server itself, never a
// cache: for reads that a write must not outrun (see writeMember).
func (v *VMs) liveList(ctx context.Context, namespace, pool string) ([]kubevirtv1.VirtualMachine, error) {
	sel := vdi.LabelPool
	if pool != "" {
		sel = vdi.LabelPool + "=" + pool
	}
	var list kubevirtv1.VirtualMachineList
	err := v.rest.Get().NamespaceIfScoped(namespace, namespace != "").Resource("virtualmachines").
		VersionedParams(&metav1.ListOptions{LabelSelector: sel}, metav1.ParameterCodec).
		Do(ctx).Into(&list)
	if err != nil {
		return nil, fmt.Errorf("kube: list VMs labelled %s: %w", sel, err)
	}
	return list.Items, nil
}

// Pools returns every VM pool: members grouped by namespace and label.
func (v *VMs) Pools(ctx context.Context) ([]vdi.Pool, error) {
	vms, err := v.list(ctx, "", "")
	if err != nil {
		return nil, err
	}
	groups := groupPools(vms)
	out := make([]vdi.Pool, len(groups))
	for i, members := range groups {
		out[i] = poolFrom(members)
	}
	return out, nil
}

// Pool returns one VM pool; ENotFound when no VM is labelled for it.
func (v *VMs) Pool(ctx context.Context, namespace, name string) (vdi.Pool, error) {
	vms, err := v.list(ctx, namespace, name)
	if err != nil {
		return vdi.Pool{}, err
	}
	if len(vms) == 0 {
		return vdi.Pool{}, v.noMember(ctx, namespace, name)
	}
	return poolFrom(vms), nil
}

// noMember is Pool's answer for a pool with no member VM: ENotFound, and
// when a member is being cloned (a pool of one whose member is made
// fresh, or one being made), says so: its definition is on its members,
// so it can be neither changed nor claimed until one is back.
func (v *VMs) noMember(ctx context.Context, namespace, name string) error {
	var list clonev1beta1.VirtualMachineCloneList
	if v.clone.Get().Namespace(namespace).Resource("virtualmachineclones").
		VersionedParams(&metav1.ListOptions{LabelSelector: LabelClonePool + "=" + name}, metav1.ParameterCodec).Do(ctx).Into(&list) == nil {
		for _, c := range list.Items {
			if c.DeletionTimestamp == nil && c.Status.Phase != clonev1beta1.Succeeded && c.Status.Phase != clonev1beta1.Failed {
				return vdi.Errorf(vdi.ENotFound, fmt.Sprintf("Try again once it is done (kubectl get vmclone -n %s %s).", namespace, c.Name),
					"Pool %s in namespace %s has no member right now: %s is being cloned (VirtualMachineClone %s/%s, %s), and the pool's access and policy are carried by its members.",
					name, namespace, c.Labels[LabelCloneTarget], namespace, c.Name, phaseText(c.Status.Phase))
			}
		}
	}
	return vdi.Errorf(vdi.ENotFound, "Pools are addressed as namespace/pool; check both.",
		"No pool %s in namespace %s.", name, namespace)
}

// Members returns the pool's VMs as members.
func (v *VMs) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	vms, err := v.list(ctx, namespace, pool)
	if err != nil {
		return nil, err
	}
	closed := closedMembers(vms)
	out := make([]vdi.Member, len(vms))
	for i := range vms {
		out[i] = memberOf(&vms[i])
		out[i].Closed = closed[vms[i].Name]
	}
	return out, nil
}

// Member returns one member; ENotFound when the VM is gone or in no pool.
func (v *VMs) Member(ctx context.Context, ref vdi.Ref) (vdi.Member, error) {
	vm, err := v.memberVM(ctx, ref)
	if err != nil {
		return vdi.Member{}, err
	}
	return memberOf(vm), nil
}

// memberVM reads the VM of a member; ENotFound when it is gone or in no pool.
func (v *VMs) memberVM(ctx context.Context, ref vdi.Ref) (*kubevirtv1.VirtualMachine, error) {
	if st := v.cache.store(ref.Namespace); st != nil {
		if o, ok, _ := st.GetByKey(ref.Namespace + "/" + ref.Name); ok {
			vm := *o.(*kubevirtv1.VirtualMachine)
			return &vm, nil
		}
		// Not a member, or one too new for the cache: the API server says.
	}
	return v.liveVM(ctx, ref)
}

// liveVM reads the VM of a member from the API server; ENotFound when it
// is gone or in no pool.
func (v *VMs) liveVM(ctx context.Context, ref vdi.Ref) (*kubevirtv1.VirtualMachine, error) {
	var vm kubevirtv1.VirtualMachine
	err := v.rest.Get().Namespace(ref.Namespace).Resource("virtualmachines").Name(ref.Name).Do(ctx).Into(&vm)
	if apierrors.IsNotFound(err) {
		return nil, vdi.Errorf(vdi.ENotFound, "It may have been deleted; get another from its pool.", "No desktop %s.", ref)
	} else if err != nil {
		return nil, fmt.Errorf("kube: get VM %s: %w", ref, err)
	}
	if vm.Labels[vdi.LabelPool] == "" {
		return nil, vdi.Errorf(vdi.ENotFound, "Only VMs labelled "+vdi.LabelPool+" are desktops.", "VM %s is in no pool.", ref)
	}
	return &vm, nil
}

// poolOf describes the pool vm belongs to, from its label and annotations
// alone; poolFrom reads a pool from all its members.
func poolOf(vm *kubevirtv1.VirtualMachine) vdi.Pool {
	p := vdi.Pool{Namespace: vm.Namespace, Name: vm.Labels[vdi.LabelPool], Kind: vdi.KindVM, Mode: vdi.ModePersistent,
		Source: vm.Annotations[AnnotationSource], Size: 1}
	if vdi.Mode(vm.Annotations[AnnotationMode]) == vdi.ModeEphemeral {
		p.Mode = vdi.ModeEphemeral
	}
	if s := annotation(vm, AnnotationPolicy); s != "" {
		// A policy that does not parse leaves the defaults; poolFrom
		// closes its pool.
		_ = json.Unmarshal([]byte(s), &p.Policy)
	}
	readAccess(annotation(vm, AnnotationAccess), &p)
	readStandby(annotation(vm, AnnotationStandby), annotation(vm, AnnotationStandbySchedule), &p)
	return p
}

// memberOf maps a VM and its printable status to a member.
func memberOf(vm *kubevirtv1.VirtualMachine) vdi.Member {
	m := vdi.Member{Namespace: vm.Namespace, Name: vm.Name, Pool: vm.Labels[vdi.LabelPool]}
	// A claim's mirror (MirrorClaim) writes the exact login as an
	// annotation beside the label's label-safe form; a label alone is a
	// member assigned before Leases existed, which its user migrates.
	if vm.Annotations[vdi.LabelAssignedTo] != "" || vm.Annotations[AnnotationClaimedAt] != "" {
		m.Shown = vm.Annotations[vdi.LabelAssignedTo]
	} else {
		m.AssignedTo = vm.Labels[vdi.LabelAssignedTo]
	}
	switch s := vm.Status.PrintableStatus; s {
	case kubevirtv1.VirtualMachineStatusRunning, kubevirtv1.VirtualMachineStatusMigrating:
		if booting(vm) {
			m.Power, m.Reason = vdi.PowerStarting, ReasonBooting
			break
		}
		m.Power = vdi.PowerRunning
		// The guest's RDP server when it has one (the portal probes it), its
		// display, and the serial console.
		m.Protocols = []vdi.Protocol{vdi.ProtocolRDP, vdi.ProtocolVNC, vdi.ProtocolSerial}
		// Its one display, split across the console's windows.
		m.ConsoleCaps = map[vdi.Protocol]vdi.Caps{vdi.ProtocolVNC: {Display: true, Clipboard: true, Resize: true, Split: true}}
	case kubevirtv1.VirtualMachineStatusStarting, kubevirtv1.VirtualMachineStatusProvisioning,
		kubevirtv1.VirtualMachineStatusWaitingForVolumeBinding, kubevirtv1.VirtualMachineStatusWaitingForReceiver:
		m.Power = vdi.PowerStarting
	case kubevirtv1.VirtualMachineStatusStopping, kubevirtv1.VirtualMachineStatusTerminating:
		m.Power = vdi.PowerStopping
	case kubevirtv1.VirtualMachineStatusStopped:
		m.Power = vdi.PowerStopped
		if alwaysOn(vm) {
			// Just asked to start (its runStrategy is Always): KubeVirt's
			// controller has not made its VMI yet. Read as stopped, the
			// console page would show a start just asked for as a
			// desktop that stopped.
			m.Power = vdi.PowerStarting
		}
	case "":
		// No controller has written a status yet: go by what was asked.
		m.Power = vdi.PowerStarting
		if halted(vm) {
			m.Power = vdi.PowerStopped
		}
	default:
		m.Power, m.Reason = vdi.PowerFailed, string(s)
		// The first condition that says what is wrong, e.g. Failure or a
		// Ready=False with the scheduler's message.
		for _, c := range vm.Status.Conditions {
			if c.Message != "" && (c.Type == kubevirtv1.VirtualMachineFailure || c.Status != "True") {
				m.Reason += ": " + c.Message
				break
			}
		}
	}
	return m
}

// ReasonBooting is the reason of a member whose VM runs but whose guest
// does not answer its readiness probe yet.
const ReasonBooting = "booting: the VM runs, its guest does not answer its readiness probe yet"

// booting reports whether vm runs (QEMU is up) but its guest is not ready:
// KubeVirt's status.ready follows the VMI's readinessProbe (a tcpSocket on
// 3389 or 5900, or the guest agent), so only a VM with one can say. One
// without is ready as soon as it runs, and its consoles may not answer
// yet; the connect page then offers what does.
func booting(vm *kubevirtv1.VirtualMachine) bool {
	return !vm.Status.Ready && vm.Spec.Template != nil && vm.Spec.Template.Spec.ReadinessProbe != nil
}

var _ vdi.Backend = (*VMs)(nil)
