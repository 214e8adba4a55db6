package kube

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

var (
	_ vdi.PoolGrower = (*Cluster)(nil)
	_ vdi.StartAsker = (*Cluster)(nil)
	_ vdi.StartAsker = (*VMs)(nil)
	_ vdi.StartAsker = (*CTs)(nil)
)

// AskStart asks a member of either kind to start, without waiting for it
// to run.
func (c *Cluster) AskStart(ctx context.Context, ref vdi.Ref) error {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return err
	}
	return b.(vdi.StartAsker).AskStart(ctx, ref)
}

// PlanCreate plans a VM pool's clones; a CT pool is one ConfigMap, made
// at once (vdi.ErrNotAJob).
func (c *Cluster) PlanCreate(ctx context.Context, p vdi.Pool) (vdi.Growth, error) {
	if _, _, err := c.pool(ctx, p.Namespace, p.Name); err == nil {
		return vdi.Growth{}, vdi.Errorf(vdi.EConflict, "Resize it instead, or pick another name.", "Pool %s/%s exists.", p.Namespace, p.Name)
	} else if vdi.ErrorCode(err) != vdi.ENotFound {
		return vdi.Growth{}, err
	}
	if p.Kind == vdi.KindCT {
		return vdi.Growth{}, vdi.ErrNotAJob
	}
	return c.VMs.PlanCreate(ctx, p)
}

// PlanResize plans resizing a VM pool; a CT pool is resized at once.
func (c *Cluster) PlanResize(ctx context.Context, namespace, name string, size int) (vdi.Growth, error) {
	b, _, err := c.pool(ctx, namespace, name)
	if err != nil {
		return vdi.Growth{}, err
	}
	if b != c.VMs {
		return vdi.Growth{}, vdi.ErrNotAJob
	}
	return c.VMs.PlanResize(ctx, namespace, name, size)
}

// PlanRecreate plans recreating a VM; a CT member is recreated at once.
func (c *Cluster) PlanRecreate(ctx context.Context, ref vdi.Ref) (vdi.Growth, error) {
	b, err := c.owner(ctx, ref)
	if err != nil {
		return vdi.Growth{}, err
	}
	if b != c.VMs {
		return vdi.Growth{}, vdi.ErrNotAJob
	}
	return c.VMs.PlanRecreate(ctx, ref)
}

// Grow makes a VM pool's missing members (only VM pools grow as jobs).
func (c *Cluster) Grow(ctx context.Context, g vdi.Growth, progress func(vdi.Progress)) error {
	return c.VMs.Grow(ctx, g, progress)
}
