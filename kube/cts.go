package kube

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// CT (container) pools.
//
// A CT pool is declared in a ConfigMap labelled LabelCTPool=<pool>, in the
// namespace its members run in (the ConfigMap's own name is free; the
// portal names the ones it makes corral-vdi-ct-<pool>):
//
//	apiVersion: v1
//	kind: ConfigMap
//	metadata:
//	  name: corral-vdi-ct-shell
//	  labels: {corral.dev/vdi-ct-pool: shell}
//	data:
//	  image: debian:12                 # required
//	  size: "2"                        # members shell-1..shell-2 when there is no members key
//	  command: '["sleep", "infinity"]' # the container's command; the image's entrypoint when absent
//	  shell: '["/bin/bash", "-l"]'     # what the terminal runs (pods/exec); /bin/sh when absent
//	  resources: '{"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}'
//	  mode: ephemeral                  # or persistent; ephemeral when absent
//	  policy: '{"disconnectGrace": "15m", "maxSession": "8h", "idleTimeout": "1h"}'
//	  terminalPort: "7681"             # optional: a raw TCP terminal the image serves itself
//	  runAsUser: "1000"                # optional: run as this uid, never root (images that allow it)
//	  members: shell-1,shell-3         # only when a shrink left gaps (the portal writes it); agrees with size
//
// Members are Pods named after them, labelled vdi.LabelPool=<pool> like VM
// members, made from the ConfigMap: a member without a Pod is stopped.
// They are fenced as the Pod Security "restricted" level asks where the
// image allows: no capabilities, no privilege escalation, the runtime's
// seccomp profile, no ServiceAccount token, and a non-root uid with
// runAsUser; egress only with LabelEgress.
// A container keeps nothing: Stop deletes the Pod and Start makes a new
// one, so the two modes differ only in what reclaiming does. Persistent
// pools stop the member (no Pod until the next claim, no resources held);
// ephemeral pools recreate it at once, so a fresh Pod waits warm for the
// next user, and make their Pods when the pool is made or grown.
//
// Nothing here touches a member behind the claim rules: Pods are deleted
// only by Stop and Recreate (which vdi.Service calls for the holder or an
// admin, or after marking the member's Lease for release and reclaim), and
// by a shrink or a pool's deletion, which first take the member's Lease
// themselves (see take). There is no background loop recreating Pods: a
// Pod that went missing shows as stopped and the next Start makes it.

// LabelCTPool on a ConfigMap declares the CT pool named by its value.
const LabelCTPool = "corral.dev/vdi-ct-pool"

// The data keys of a CT pool's ConfigMap.
const (
	CTKeyImage        = "image"
	CTKeySize         = "size"
	CTKeyCommand      = "command"
	CTKeyShell        = "shell"
	CTKeyResources    = "resources"
	CTKeyMode         = "mode"
	CTKeyPolicy       = "policy"
	CTKeyTerminalPort = "terminalPort"
	CTKeyMembers      = "members"
	CTKeyRunAsUser    = "runAsUser"
)

// LabelEgress marks a desktop Pod whose pool lets it reach the outside
// (policy network "outbound"): the pool namespace kit's NetworkPolicies
// deny every other desktop all egress, and this one the cluster's and the
// host's private and link-local ranges (the API server, Services, the
// cloud metadata address) all the same. On a VM pool, label the golden
// VM's template so (spec.template.metadata.labels): its clones copy it.
const LabelEgress = "corral.dev/vdi-egress"

// AnnotationShell on a member Pod is the terminal command (a JSON array),
// copied from its pool when the Pod was made.
const AnnotationShell = "corral.dev/vdi-shell"

// ctContainer is the name of a member Pod's container.
const ctContainer = "desktop"

// defaultShell is the terminal command when the pool names none.
var defaultShell = []string{"/bin/sh"}

// CTs runs CT pools: ConfigMaps labelled LabelCTPool declare them, Pods
// are their members.
type CTs struct {
	cs        kubernetes.Interface
	leases    vdi.Leases
	namespace string
	// The pools' ConfigMaps and members' Pods, once StartCaches ran; nil
	// reads the API server.
	configs, podCache *watched
}

// NewCTs returns CTs over cfg.REST, reading cfg.Namespace (all when
// empty); members are claimed in cfg.Leases before they are removed.
func NewCTs(cfg Config) (*CTs, error) {
	cs, err := kubernetes.NewForConfig(cfg.REST)
	if err != nil {
		return nil, fmt.Errorf("kube: CT pools client: %w", err)
	}
	return &CTs{cs: cs, leases: cfg.Leases, namespace: cfg.Namespace}, nil
}

var _ vdi.Backend = (*CTs)(nil)

// configMaps lists the ConfigMaps declaring CT pools in namespace (the
// configured one when empty), of pool when pool is not empty.
func (c *CTs) configMaps(ctx context.Context, namespace, pool string) ([]corev1.ConfigMap, error) {
	if namespace == "" {
		namespace = c.namespace
	}
	var items []corev1.ConfigMap
	if st := c.configs.store(namespace); st != nil {
		items = cachedList[corev1.ConfigMap](st, namespace, pool)
	} else {
		sel := LabelCTPool
		if pool != "" {
			sel = LabelCTPool + "=" + pool
		}
		list, err := c.cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, fmt.Errorf("kube: list ConfigMaps labelled %s: %w", sel, err)
		}
		items = list.Items
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i], items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return items, nil
}

// Pools returns every CT pool whose ConfigMap reads; ConfigMaps that do not
// are left out (Pool on one says what is wrong).
func (c *CTs) Pools(ctx context.Context) ([]vdi.Pool, error) {
	cms, err := c.configMaps(ctx, "", "")
	if err != nil {
		return nil, err
	}
	var out []vdi.Pool
	seen := map[vdi.Ref]bool{}
	for i := range cms {
		p, err := parseCTPool(&cms[i])
		if err != nil || seen[vdi.Ref{Namespace: p.Namespace, Name: p.Name}] {
			continue
		}
		seen[vdi.Ref{Namespace: p.Namespace, Name: p.Name}] = true
		out = append(out, p.Pool)
	}
	return out, nil
}

// pool returns the CT pool namespace/name; ENotFound when no ConfigMap
// declares it, EInvalid when its ConfigMap does not read.
func (c *CTs) pool(ctx context.Context, namespace, name string) (*ctPool, error) {
	cms, err := c.configMaps(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	if len(cms) == 0 {
		return nil, vdi.Errorf(vdi.ENotFound, "Pools are addressed as namespace/pool; check both.",
			"No pool %s in namespace %s.", name, namespace)
	}
	// Two ConfigMaps for one pool: the first by name counts, as in Pools.
	return parseCTPool(&cms[0])
}

// Pool returns one CT pool.
func (c *CTs) Pool(ctx context.Context, namespace, name string) (vdi.Pool, error) {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return vdi.Pool{}, err
	}
	return p.Pool, nil
}

// pods returns the Pods of the pool's members, in the members' order: nil
// where a member has none.
func (c *CTs) pods(ctx context.Context, p *ctPool) ([]*corev1.Pod, error) {
	out := make([]*corev1.Pod, len(p.members))
	at := p.memberIndex()
	if st := c.podCache.store(p.Namespace); st != nil {
		objs, _ := st.ByIndex(poolIndex, p.Namespace+"/"+p.Name)
		for _, o := range objs {
			pod := o.(*corev1.Pod)
			if i, ok := at[pod.Name]; ok {
				out[i] = pod
			}
		}
		return out, nil
	}
	list, err := c.cs.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + p.Name})
	if err != nil {
		return nil, fmt.Errorf("kube: list Pods of CT pool %s/%s: %w", p.Namespace, p.Name, err)
	}
	for i := range list.Items {
		if j, ok := at[list.Items[i].Name]; ok {
			out[j] = &list.Items[i]
		}
	}
	return out, nil
}

// Members returns the pool's members, a stopped one for each missing Pod.
func (c *CTs) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	p, pods, err := c.poolPods(ctx, namespace, pool)
	if err != nil {
		return nil, err
	}
	out := make([]vdi.Member, len(p.members))
	for i, name := range p.members {
		out[i] = ctMemberOf(p, name, pods[i])
	}
	return out, nil
}

// WalkMembers calls yield with each of the pool's members as Members
// lists them, until it returns false (vdi.MemberWalker: a claim keeps a
// handful, so it needs no copy of them all).
func (c *CTs) WalkMembers(ctx context.Context, namespace, pool string, yield func(vdi.Member) bool) error {
	p, pods, err := c.poolPods(ctx, namespace, pool)
	if err != nil {
		return err
	}
	for i, name := range p.members {
		if !yield(ctMemberOf(p, name, pods[i])) {
			break
		}
	}
	return nil
}

// poolPods returns the CT pool namespace/name and its members' Pods (see
// pods).
func (c *CTs) poolPods(ctx context.Context, namespace, name string) (*ctPool, []*corev1.Pod, error) {
	p, err := c.pool(ctx, namespace, name)
	if err != nil {
		return nil, nil, err
	}
	pods, err := c.pods(ctx, p)
	return p, pods, err
}

// owner returns the CT pool that has member ref; ENotFound when none.
func (c *CTs) owner(ctx context.Context, ref vdi.Ref) (*ctPool, error) {
	cms, err := c.configMaps(ctx, ref.Namespace, "")
	if err != nil {
		return nil, err
	}
	for i := range cms {
		if p, err := parseCTPool(&cms[i]); err == nil && p.has(ref.Name) {
			return p, nil
		}
	}
	return nil, vdi.Errorf(vdi.ENotFound, "It may have been deleted; get another from its pool.", "No desktop %s.", ref)
}

// member returns ref's pool and Pod (nil when there is none).
func (c *CTs) member(ctx context.Context, ref vdi.Ref) (*ctPool, *corev1.Pod, error) {
	p, err := c.owner(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	pod, err := c.pod(ctx, ref)
	if apierrors.IsNotFound(err) {
		return p, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("kube: get Pod %s: %w", ref, err)
	}
	if pod.Labels[vdi.LabelPool] != p.Name {
		return nil, nil, notMemberPod(ref, p)
	}
	return p, pod, nil
}

// notMemberPod is the error of a Pod named as a member of p that is not
// labelled into it.
func notMemberPod(ref vdi.Ref, p *ctPool) error {
	return vdi.Errorf(vdi.EConflict, "Rename or delete that Pod; members' Pods are made by the portal.",
		"Pod %s is not labelled %s=%s, yet its name is a member of that CT pool.", ref, vdi.LabelPool, p.Name)
}

// pod returns the Pod ref: from the cache when it serves reads (a Pod not
// labelled as a member is not there), else from the API server.
func (c *CTs) pod(ctx context.Context, ref vdi.Ref) (*corev1.Pod, error) {
	if st := c.podCache.store(ref.Namespace); st != nil {
		o, ok, _ := st.GetByKey(ref.Namespace + "/" + ref.Name)
		if !ok {
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), ref.Name)
		}
		return o.(*corev1.Pod), nil
	}
	return c.cs.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
}

// Member returns one CT member; ENotFound when no CT pool has it.
func (c *CTs) Member(ctx context.Context, ref vdi.Ref) (vdi.Member, error) {
	p, pod, err := c.member(ctx, ref)
	if err != nil {
		return vdi.Member{}, err
	}
	return ctMemberOf(p, ref.Name, pod), nil
}
