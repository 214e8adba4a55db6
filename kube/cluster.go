package kube

import (
	"context"
	"fmt"
	"net"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Cluster is the Kubernetes backend: VM pools (KubeVirt VMs, see VMs) and
// CT pools (Pods declared by ConfigMaps, see CTs) side by side; without
// KubeVirt installed there are just no VM pools. Each call
// goes to whichever owns the pool or member; a CT pool and a VM pool of one
// name in one namespace would share the member label, so creating either is
// refused while the other exists.
type Cluster struct {
	VMs *VMs
	CTs *CTs
	// FillWait bounds how long StartCaches waits for its caches to fill;
	// CacheFillWait when zero.
	FillWait time.Duration
}

var (
	_ vdi.Backend       = (*Cluster)(nil)
	_ vdi.MemberWalker  = (*Cluster)(nil)
	_ vdi.MemberWalker  = (*CTs)(nil)
	_ vdi.PoolAdmin     = (*Cluster)(nil)
	_ vdi.ClaimMirror   = (*Cluster)(nil)
	_ vdi.Screenshotter = (*Cluster)(nil)
	_ vdi.Screenshotter = (*VMs)(nil)

	_ vdi.DefinitionRepairer = (*Cluster)(nil)
	_ vdi.DefinitionRepairer = (*VMs)(nil)
)

// RepairDefinitions writes VM pools' definitions on the members that lack
// them (a CT pool's lives in one ConfigMap); without KubeVirt installed
// there are none to repair.
func (c *Cluster) RepairDefinitions(ctx context.Context) (int, error) {
	n, err := c.VMs.RepairDefinitions(ctx)
	if apierrors.IsNotFound(err) {
		return n, nil // KubeVirt is not installed
	}
	return n, err
}

// NewCluster returns the backend over cfg.REST, reading cfg.Namespace
// (all when empty), claiming in cfg.Leases.
func NewCluster(cfg Config) (*Cluster, error) {
	vms, err := NewVMs(cfg)
	if err != nil {
		return nil, err
	}
	cts, err := NewCTs(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{VMs: vms, CTs: cts}, nil
}

// Pools returns the VM pools, then the CT pools.
func (c *Cluster) Pools(ctx context.Context) ([]vdi.Pool, error) {
	vms, err := c.VMs.Pools(ctx)
	if apierrors.IsNotFound(err) {
		vms, err = nil, nil // KubeVirt is not installed
	}
	if err != nil {
		return nil, err
	}
	cts, err := c.CTs.Pools(ctx)
	if err != nil {
		return nil, err
	}
	return append(vms, cts...), nil
}

// pool returns the backend that has pool namespace/name, CTs first.
func (c *Cluster) pool(ctx context.Context, namespace, name string) (vdi.Backend, vdi.Pool, error) {
	p, err := c.CTs.Pool(ctx, namespace, name)
	if vdi.ErrorCode(err) != vdi.ENotFound {
		return c.CTs, p, err
	}
	p, err = c.VMs.Pool(ctx, namespace, name)
	if apierrors.IsNotFound(err) { // KubeVirt is not installed
		err = vdi.Errorf(vdi.ENotFound, "Pools are addressed as namespace/pool; check both.", "No pool %s in namespace %s.", name, namespace)
	}
	return c.VMs, p, err
}

// Pool returns one pool of either kind.
func (c *Cluster) Pool(ctx context.Context, namespace, name string) (vdi.Pool, error) {
	_, p, err := c.pool(ctx, namespace, name)
	return p, err
}

// Members returns the members of a pool of either kind.
func (c *Cluster) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	b, _, err := c.pool(ctx, namespace, pool)
	if err != nil {
		return nil, err
	}
	return b.Members(ctx, namespace, pool)
}

// WalkMembers calls yield with each member of a pool of either kind
// (vdi.MemberWalker): a CT pool's from the caches one at a time, a VM
// pool's from its list.
func (c *Cluster) WalkMembers(ctx context.Context, namespace, pool string, yield func(vdi.Member) bool) error {
	b, _, err := c.pool(ctx, namespace, pool)
	if err != nil {
		return err
	}
	return vdi.WalkMembers(ctx, b, namespace, pool, yield)
}

// owner returns the backend that has member ref: a CT pool's member when a
// CT pool lists it, else a VM.
func (c *Cluster) owner(ctx context.Context, ref vdi.Ref) (vdi.Backend, error) {
	_, err := c.CTs.owner(ctx, ref)
	if err == nil {
		return c.CTs, nil
	}
	if vdi.ErrorCode(err) == vdi.ENotFound {
		return c.VMs, nil
	}
	return nil, err
}

// Member returns one member of either kind.
func (c *Cluster) Member(ctx context.Context, ref vdi.Ref) (vdi.Member, error) {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return vdi.Member{}, err
	}
	return b.Member(ctx, ref)
}

// Start powers a member on.
func (c *Cluster) Start(ctx context.Context, ref vdi.Ref) error {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return err
	}
	return b.Start(ctx, ref)
}

// Stop powers a member off.
func (c *Cluster) Stop(ctx context.Context, ref vdi.Ref) error {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return err
	}
	return b.Stop(ctx, ref)
}

// Recreate makes a member fresh from its pool's source.
func (c *Cluster) Recreate(ctx context.Context, ref vdi.Ref) error {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return err
	}
	return b.Recreate(ctx, ref)
}

// Dial is the direct path to a member's console: the KubeVirt subresource
// of a VM, or a CT's own terminal port.
func (c *Cluster) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return nil, err
	}
	return b.Dial(ctx, ref, p)
}

// Screenshot returns a PNG of a VM member's display (see
// VMs.Screenshot); a CT member has none: its terminal is its screen.
func (c *Cluster) Screenshot(ctx context.Context, ref vdi.Ref) ([]byte, error) {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return nil, err
	}
	if b != vdi.Backend(c.VMs) {
		return nil, fmt.Errorf("kube: container desktop %s has no screenshot: %w", ref, vdi.ErrNoScreenshot)
	}
	return c.VMs.Screenshot(ctx, ref)
}

// MirrorClaim shows the claim on a VM member; a CT member's Pod is made
// afresh too often to carry it, so there it does nothing.
func (c *Cluster) MirrorClaim(ctx context.Context, ref vdi.Ref, holder string, claimedAt time.Time) error {
	b, err := c.owner(ctx, ref)
	if err != nil || b != vdi.Backend(c.VMs) {
		return err
	}
	return c.VMs.MirrorClaim(ctx, ref, holder, claimedAt)
}

// CreatePool makes a pool of p.Kind, unless a pool of that name exists in
// the namespace with either kind.
func (c *Cluster) CreatePool(ctx context.Context, p vdi.Pool) error {
	if _, _, err := c.pool(ctx, p.Namespace, p.Name); err == nil {
		return vdi.Errorf(vdi.EConflict, "Resize it instead, or pick another name.", "Pool %s/%s exists.", p.Namespace, p.Name)
	} else if vdi.ErrorCode(err) != vdi.ENotFound {
		return err
	}
	if p.Kind == vdi.KindCT {
		return c.CTs.CreatePool(ctx, p)
	}
	return c.VMs.CreatePool(ctx, p)
}

// admin returns the pool admin of pool namespace/name.
func (c *Cluster) admin(ctx context.Context, namespace, name string) (vdi.PoolAdmin, error) {
	b, _, err := c.pool(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return b.(vdi.PoolAdmin), nil
}

// ResizePool resizes a pool of either kind.
func (c *Cluster) ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error {
	a, err := c.admin(ctx, namespace, name)
	if err != nil {
		return err
	}
	return a.ResizePool(ctx, namespace, name, size, claimed)
}

// SetPolicy replaces the policy of a pool of either kind.
func (c *Cluster) SetPolicy(ctx context.Context, namespace, name string, p vdi.Policy) error {
	a, err := c.admin(ctx, namespace, name)
	if err != nil {
		return err
	}
	return a.SetPolicy(ctx, namespace, name, p)
}

// DeletePool deletes a pool of either kind.
func (c *Cluster) DeletePool(ctx context.Context, namespace, name string) error {
	a, err := c.admin(ctx, namespace, name)
	if err != nil {
		return err
	}
	return a.DeletePool(ctx, namespace, name)
}
