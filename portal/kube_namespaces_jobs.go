package portal

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// PlanCreate plans a pool's creation in one of the pool namespaces.
func (b *namespacedBackend) PlanCreate(ctx context.Context, p vdi.Pool) (vdi.Growth, error) {
	c, err := b.in(p.Namespace)
	if err != nil {
		return vdi.Growth{}, err
	}
	return c.PlanCreate(ctx, p)
}

// PlanResize plans a pool's resize.
func (b *namespacedBackend) PlanResize(ctx context.Context, namespace, name string, size int) (vdi.Growth, error) {
	c, err := b.in(namespace)
	if err != nil {
		return vdi.Growth{}, err
	}
	return c.PlanResize(ctx, namespace, name, size)
}

// PlanRecreate plans a member's recreation.
func (b *namespacedBackend) PlanRecreate(ctx context.Context, ref vdi.Ref) (vdi.Growth, error) {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return vdi.Growth{}, err
	}
	return c.PlanRecreate(ctx, ref)
}

// Grow makes a pool's missing members in its namespace.
func (b *namespacedBackend) Grow(ctx context.Context, g vdi.Growth, progress func(vdi.Progress)) error {
	c, err := b.in(g.Pool.Namespace)
	if err != nil {
		return err
	}
	return c.Grow(ctx, g, progress)
}

// AskStart asks a member to start, without waiting for it to run.
func (b *namespacedBackend) AskStart(ctx context.Context, ref vdi.Ref) error {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return err
	}
	return c.AskStart(ctx, ref)
}
