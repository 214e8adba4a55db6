package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

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
//	  size: "3"                        # members shell-1..shell-3
//	  command: '["sleep", "infinity"]' # the container's command; the image's entrypoint when absent
//	  shell: '["/bin/bash", "-l"]'     # what the terminal runs (pods/exec); /bin/sh when absent
//	  resources: '{"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}'
//	  mode: ephemeral                  # or persistent; ephemeral when absent
//	  policy: '{"disconnectGrace": "15m", "maxSession": "8h", "idleTimeout": "1h"}'
//	  terminalPort: "7681"             # optional: a raw TCP terminal the image serves itself
//	  members: shell-1,shell-2,shell-3 # written by the portal once a shrink leaves gaps
//
// Members are Pods named after them, labelled vdi.LabelPool=<pool> like VM
// members, made from the ConfigMap: a member without a Pod is stopped.
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
)

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
}

// NewCTs returns CTs over cfg, reading namespace (all when empty). leases
// is the claim store: members are claimed there before they are removed.
func NewCTs(cfg *rest.Config, namespace string, leases vdi.Leases) (*CTs, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: CT pools client: %w", err)
	}
	return &CTs{cs: cs, leases: leases, namespace: namespace}, nil
}

var _ vdi.Backend = (*CTs)(nil)

// ctPool is a CT pool as its ConfigMap declares it.
type ctPool struct {
	vdi.Pool
	cm           *corev1.ConfigMap
	members      []string
	command      []string
	shell        []string
	resources    corev1.ResourceRequirements
	terminalPort int32
}

// has reports whether member is one of the pool's.
func (p *ctPool) has(member string) bool { return slices.Contains(p.members, member) }

// parseCTPool reads a pool's ConfigMap; the error says which key is wrong
// and how to write it.
func parseCTPool(cm *corev1.ConfigMap) (*ctPool, error) {
	name := cm.Labels[LabelCTPool]
	d := cm.Data
	p := &ctPool{cm: cm, Pool: vdi.Pool{Namespace: cm.Namespace, Name: name, Kind: vdi.KindCT, Mode: vdi.ModeEphemeral, Source: d[CTKeyImage]}}
	bad := func(key, want string, err error) error {
		msg := fmt.Sprintf("ConfigMap %s/%s of CT pool %s: %s %q is not %s", cm.Namespace, cm.Name, name, key, d[key], want)
		if err != nil {
			msg += ": " + err.Error()
		}
		return vdi.Errorf(vdi.EInvalid, "Fix the ConfigMap (kubectl edit configmap -n "+cm.Namespace+" "+cm.Name+").", "%s.", msg)
	}
	if err := vdi.ValidName("pool", name); err != nil {
		return nil, bad("label "+LabelCTPool, "a pool name", err)
	}
	if p.Source == "" {
		return nil, bad(CTKeyImage, "an image (e.g. debian:12)", nil)
	}
	switch m := vdi.Mode(d[CTKeyMode]); m {
	case "":
	case vdi.ModeEphemeral, vdi.ModePersistent:
		p.Mode = m
	default:
		return nil, bad(CTKeyMode, "persistent or ephemeral", nil)
	}
	size := 0
	if s, ok := d[CTKeySize]; ok {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 || n > vdi.MaxPoolSize {
			return nil, bad(CTKeySize, fmt.Sprintf("a whole number from 0 to %d", vdi.MaxPoolSize), nil)
		}
		size = n
	}
	if s, ok := d[CTKeyMembers]; ok {
		for _, m := range strings.Split(s, ",") {
			if m = strings.TrimSpace(m); m != "" {
				p.members = append(p.members, m)
			}
		}
		if _, hasSize := d[CTKeySize]; hasSize && size != len(p.members) {
			return nil, bad(CTKeySize, fmt.Sprintf("the number of members listed (%d); resize through the portal, or remove the %s key", len(p.members), CTKeyMembers), nil)
		}
	} else {
		p.members = numbered(name, size)
	}
	p.Size = len(p.members)
	for key, dst := range map[string]*[]string{CTKeyCommand: &p.command, CTKeyShell: &p.shell} {
		if s := d[key]; s != "" {
			if err := json.Unmarshal([]byte(s), dst); err != nil || len(*dst) == 0 {
				return nil, bad(key, `a JSON array of strings, e.g. ["/bin/bash", "-l"]`, err)
			}
		}
	}
	if len(p.shell) == 0 {
		p.shell = defaultShell
	}
	if s := d[CTKeyResources]; s != "" {
		if err := json.Unmarshal([]byte(s), &p.resources); err != nil {
			return nil, bad(CTKeyResources, `resource requirements as JSON, e.g. {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}}`, err)
		}
	}
	if s := d[CTKeyPolicy]; s != "" {
		pol, err := parsePolicy(s)
		if err != nil {
			return nil, bad(CTKeyPolicy, `a policy as JSON, e.g. {"disconnectGrace": "15m", "maxSession": "8h", "idleTimeout": "1h"}`, err)
		}
		p.Policy = pol
	}
	if s := d[CTKeyTerminalPort]; s != "" {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 65535 {
			return nil, bad(CTKeyTerminalPort, "a TCP port from 1 to 65535", nil)
		}
		p.terminalPort = int32(n)
	}
	return p, nil
}

// policyJSON is vdi.Policy with durations as Go duration strings ("15m"),
// which people write; numbers (nanoseconds, as vdi.Policy marshals) are
// read too.
type policyJSON struct {
	DisconnectGrace json.RawMessage `json:"disconnectGrace,omitempty"`
	MaxSession      json.RawMessage `json:"maxSession,omitempty"`
	IdleTimeout     json.RawMessage `json:"idleTimeout,omitempty"`
}

func parsePolicy(s string) (vdi.Policy, error) {
	var raw policyJSON
	if err := json.Unmarshal([]byte(s), &raw); err != nil {
		return vdi.Policy{}, err
	}
	var p vdi.Policy
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *time.Duration
	}{{"disconnectGrace", raw.DisconnectGrace, &p.DisconnectGrace}, {"maxSession", raw.MaxSession, &p.MaxSession}, {"idleTimeout", raw.IdleTimeout, &p.IdleTimeout}} {
		if len(f.raw) == 0 {
			continue
		}
		var str string
		if err := json.Unmarshal(f.raw, &str); err == nil {
			d, err := time.ParseDuration(str)
			if err != nil {
				return vdi.Policy{}, fmt.Errorf("%s: %w", f.name, err)
			}
			*f.dst = d
			continue
		}
		var ns int64
		if err := json.Unmarshal(f.raw, &ns); err != nil {
			return vdi.Policy{}, fmt.Errorf("%s: want a duration such as \"15m\"", f.name)
		}
		*f.dst = time.Duration(ns)
	}
	if p.DisconnectGrace < 0 || p.MaxSession < 0 || p.IdleTimeout < 0 {
		return vdi.Policy{}, fmt.Errorf("durations cannot be negative")
	}
	return p, nil
}

// formatPolicy writes p as parsePolicy reads it, with duration strings.
func formatPolicy(p vdi.Policy) string {
	m := map[string]string{}
	for name, d := range map[string]time.Duration{"disconnectGrace": p.DisconnectGrace, "maxSession": p.MaxSession, "idleTimeout": p.IdleTimeout} {
		if d != 0 {
			m[name] = d.String()
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// configMaps lists the ConfigMaps declaring CT pools in namespace (the
// configured one when empty), of pool when pool is not empty.
func (c *CTs) configMaps(ctx context.Context, namespace, pool string) ([]corev1.ConfigMap, error) {
	if namespace == "" {
		namespace = c.namespace
	}
	sel := LabelCTPool
	if pool != "" {
		sel = LabelCTPool + "=" + pool
	}
	list, err := c.cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("kube: list ConfigMaps labelled %s: %w", sel, err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace < b.Namespace || a.Namespace == b.Namespace && a.Name < b.Name
	})
	return list.Items, nil
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

// pods returns the Pods of the pool's members by name.
func (c *CTs) pods(ctx context.Context, p *ctPool) (map[string]*corev1.Pod, error) {
	list, err := c.cs.CoreV1().Pods(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: vdi.LabelPool + "=" + p.Name})
	if err != nil {
		return nil, fmt.Errorf("kube: list Pods of CT pool %s/%s: %w", p.Namespace, p.Name, err)
	}
	out := make(map[string]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		if pod := &list.Items[i]; p.has(pod.Name) {
			out[pod.Name] = pod
		}
	}
	return out, nil
}

// Members returns the pool's members, a stopped one for each missing Pod.
func (c *CTs) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	p, err := c.pool(ctx, namespace, pool)
	if err != nil {
		return nil, err
	}
	pods, err := c.pods(ctx, p)
	if err != nil {
		return nil, err
	}
	out := make([]vdi.Member, len(p.members))
	for i, name := range p.members {
		out[i] = ctMemberOf(p, name, pods[name])
	}
	return out, nil
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
	pod, err := c.cs.CoreV1().Pods(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return p, nil, nil
	} else if err != nil {
		return nil, nil, fmt.Errorf("kube: get Pod %s: %w", ref, err)
	}
	if pod.Labels[vdi.LabelPool] != p.Name {
		return nil, nil, vdi.Errorf(vdi.EConflict, "Rename or delete that Pod; members' Pods are made by the portal.",
			"Pod %s is not labelled %s=%s, yet its name is a member of that CT pool.", ref, vdi.LabelPool, p.Name)
	}
	return p, pod, nil
}

// Member returns one CT member; ENotFound when no CT pool has it.
func (c *CTs) Member(ctx context.Context, ref vdi.Ref) (vdi.Member, error) {
	p, pod, err := c.member(ctx, ref)
	if err != nil {
		return vdi.Member{}, err
	}
	return ctMemberOf(p, ref.Name, pod), nil
}

// ctMemberOf maps a member and its Pod (nil: none) to a member: no Pod is
// stopped; Pending is starting unless a container waits for a reason a
// person must fix (an image that does not pull, a container that keeps
// crashing, no node to run on), which is failed with that reason.
func ctMemberOf(p *ctPool, name string, pod *corev1.Pod) vdi.Member {
	m := vdi.Member{Namespace: p.Namespace, Name: name, Pool: p.Name, Power: vdi.PowerStopped}
	if pod == nil {
		return m
	}
	if pod.DeletionTimestamp != nil {
		m.Power = vdi.PowerStopping
		return m
	}
	if reason := podTrouble(pod); reason != "" {
		m.Power, m.Reason = vdi.PowerFailed, reason
		return m
	}
	switch pod.Status.Phase {
	case corev1.PodRunning:
		m.Power = vdi.PowerStarting
		if podReady(pod) {
			m.Power, m.Protocols = vdi.PowerRunning, []vdi.Protocol{vdi.ProtocolTerminal}
		}
	case corev1.PodSucceeded:
		m.Power = vdi.PowerStopped
	case corev1.PodFailed:
		m.Power, m.Reason = vdi.PowerFailed, "The container ended"
		if pod.Status.Reason != "" {
			m.Reason += " (" + pod.Status.Reason + ")"
		}
		if pod.Status.Message != "" {
			m.Reason += ": " + pod.Status.Message
		}
	default:
		m.Power = vdi.PowerStarting
	}
	return m
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Container waiting reasons that do not mend by waiting.
var stuckReasons = map[string]string{
	"CrashLoopBackOff":           "The container keeps exiting; check its command and image",
	"ImagePullBackOff":           "The image cannot be pulled; check its name and the registry's credentials",
	"ErrImagePull":               "The image cannot be pulled; check its name and the registry's credentials",
	"InvalidImageName":           "The image name is not valid",
	"ErrImageNeverPull":          "The image is not on the node and its pull policy is Never",
	"CreateContainerConfigError": "The container's configuration is wrong",
	"CreateContainerError":       "The container could not be created",
	"RunContainerError":          "The container could not be started",
}

// podTrouble says why pod cannot run, or "" when nothing is known wrong.
func podTrouble(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil {
			if text, ok := stuckReasons[w.Reason]; ok {
				s := text + " (" + w.Reason
				if w.Message != "" {
					s += ": " + w.Message
				}
				return s + ")"
			}
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return "No node can run it (" + c.Message + ")"
		}
	}
	return ""
}
