package portal

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// parsePoolNamespaces reads CORRAL_VDI_POOL_NAMESPACES: namespace names,
// comma-separated, each once.
func parsePoolNamespaces(s string) ([]string, error) {
	var out []string
	for _, ns := range splitList(s) {
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("CORRAL_VDI_POOL_NAMESPACES: %q is not a namespace name (%s); list namespaces comma-separated, e.g. vdi-team-a,vdi-team-b", ns, strings.Join(errs, "; "))
		}
		if !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// The namespaced mode's backend and claims: one kube backend and one
// Lease cache per pool namespace, each confined to its namespace, so the
// portal never asks the API server about any other. A namespace outside
// the list is refused here, before any request.

// namespaceBackend is what namespacedBackend fans out to: the kube
// backend of one namespace.
type namespaceBackend interface {
	vdi.Backend
	vdi.MemberWalker
	vdi.PoolAdmin
	vdi.ClaimMirror
	vdi.Screenshotter
	vdi.DefinitionRepairer
	vdi.PoolGrower
	vdi.StartAsker
}

// namespacedBackend routes each call to the backend of its namespace.
type namespacedBackend struct {
	names []string
	by    map[string]namespaceBackend
}

var (
	_ vdi.Backend       = (*namespacedBackend)(nil)
	_ vdi.MemberWalker  = (*namespacedBackend)(nil)
	_ vdi.PoolAdmin     = (*namespacedBackend)(nil)
	_ vdi.ClaimMirror   = (*namespacedBackend)(nil)
	_ vdi.Screenshotter = (*namespacedBackend)(nil)

	_ vdi.DefinitionRepairer = (*namespacedBackend)(nil)
	_ vdi.PoolGrower         = (*namespacedBackend)(nil)
	_ vdi.StartAsker         = (*namespacedBackend)(nil)
	_ vdi.Leases             = (*namespacedLeases)(nil)
)

// errNotPoolNamespace is the one-line refusal of a namespace the portal
// was not given.
func errNotPoolNamespace(ns string, names []string) error {
	return vdi.Errorf(vdi.ENotFound, "Pools are in namespaces "+strings.Join(names, ", ")+
		"; an operator adds one with deploy/pool-namespace and CORRAL_VDI_POOL_NAMESPACES.",
		"Namespace %s is not one of the portal's pool namespaces.", ns)
}

func (b *namespacedBackend) in(ns string) (namespaceBackend, error) {
	if c, ok := b.by[ns]; ok {
		return c, nil
	}
	return nil, errNotPoolNamespace(ns, b.names)
}

// Pools returns every pool namespace's pools, in the order the namespaces
// were given.
func (b *namespacedBackend) Pools(ctx context.Context) ([]vdi.Pool, error) {
	var out []vdi.Pool
	for _, ns := range b.names {
		ps, err := b.by[ns].Pools(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
	}
	return out, nil
}

// RepairDefinitions repairs the pools of every pool namespace.
func (b *namespacedBackend) RepairDefinitions(ctx context.Context) (int, error) {
	n := 0
	var errs []error
	for _, ns := range b.names {
		k, err := b.by[ns].RepairDefinitions(ctx)
		n += k
		errs = append(errs, err)
	}
	return n, errors.Join(errs...)
}

// Pool returns one pool.
func (b *namespacedBackend) Pool(ctx context.Context, namespace, name string) (vdi.Pool, error) {
	c, err := b.in(namespace)
	if err != nil {
		return vdi.Pool{}, err
	}
	return c.Pool(ctx, namespace, name)
}

// Members returns a pool's members.
func (b *namespacedBackend) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	c, err := b.in(namespace)
	if err != nil {
		return nil, err
	}
	return c.Members(ctx, namespace, pool)
}

// WalkMembers shows a pool's members one at a time.
func (b *namespacedBackend) WalkMembers(ctx context.Context, namespace, pool string, yield func(vdi.Member) bool) error {
	c, err := b.in(namespace)
	if err != nil {
		return err
	}
	return c.WalkMembers(ctx, namespace, pool, yield)
}

// Member returns one member.
func (b *namespacedBackend) Member(ctx context.Context, ref vdi.Ref) (vdi.Member, error) {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return vdi.Member{}, err
	}
	return c.Member(ctx, ref)
}

// Start powers a member on.
func (b *namespacedBackend) Start(ctx context.Context, ref vdi.Ref) error {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return err
	}
	return c.Start(ctx, ref)
}

// Stop powers a member off.
func (b *namespacedBackend) Stop(ctx context.Context, ref vdi.Ref) error {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return err
	}
	return c.Stop(ctx, ref)
}

// Recreate makes a member anew from its golden source.
func (b *namespacedBackend) Recreate(ctx context.Context, ref vdi.Ref) error {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return err
	}
	return c.Recreate(ctx, ref)
}

// Dial opens a member's console directly.
func (b *namespacedBackend) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return nil, err
	}
	return c.Dial(ctx, ref, p)
}

// Screenshot takes a picture of a member's screen without its console.
func (b *namespacedBackend) Screenshot(ctx context.Context, ref vdi.Ref) ([]byte, error) {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return nil, err
	}
	return c.Screenshot(ctx, ref)
}

// MirrorClaim marks a member with its holder for kubectl users.
func (b *namespacedBackend) MirrorClaim(ctx context.Context, ref vdi.Ref, holder string, claimedAt time.Time) error {
	c, err := b.in(ref.Namespace)
	if err != nil {
		return err
	}
	return c.MirrorClaim(ctx, ref, holder, claimedAt)
}

// CreatePool creates a pool in one of the pool namespaces.
func (b *namespacedBackend) CreatePool(ctx context.Context, p vdi.Pool) error {
	c, err := b.in(p.Namespace)
	if err != nil {
		return err
	}
	return c.CreatePool(ctx, p)
}

// ResizePool changes a pool's size.
func (b *namespacedBackend) ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error {
	c, err := b.in(namespace)
	if err != nil {
		return err
	}
	return c.ResizePool(ctx, namespace, name, size, claimed)
}

// SetPolicy changes a pool's policy.
func (b *namespacedBackend) SetPolicy(ctx context.Context, namespace, name string, p vdi.Policy) error {
	c, err := b.in(namespace)
	if err != nil {
		return err
	}
	return c.SetPolicy(ctx, namespace, name, p)
}

// SetAccess changes who may use a pool.
func (b *namespacedBackend) SetAccess(ctx context.Context, namespace, name string, a vdi.Access, l vdi.Limits) error {
	c, err := b.in(namespace)
	if err != nil {
		return err
	}
	return c.SetAccess(ctx, namespace, name, a, l)
}

// SetStandby changes how many free members a pool keeps on, and when.
func (b *namespacedBackend) SetStandby(ctx context.Context, namespace, name string, st vdi.Standby, sched vdi.StandbySchedule) error {
	c, err := b.in(namespace)
	if err != nil {
		return err
	}
	return c.SetStandby(ctx, namespace, name, st, sched)
}

// DeletePool deletes a pool.
func (b *namespacedBackend) DeletePool(ctx context.Context, namespace, name string) error {
	c, err := b.in(namespace)
	if err != nil {
		return err
	}
	return c.DeletePool(ctx, namespace, name)
}

// namespacedLeases routes claims to the Lease store of their namespace,
// and the users' claim locks (vdi.Config.LockNamespace: the portal's own
// namespace) to lockStore, which nothing lists.
type namespacedLeases struct {
	names     []string
	by        map[string]vdi.Leases
	lockNS    string
	lockStore vdi.Leases
}

// OnAcquire calls f on a claim in any pool namespace.
func (l *namespacedLeases) OnAcquire(f func()) {
	for _, s := range l.by {
		if n, ok := s.(vdi.AcquireNotifier); ok {
			n.OnAcquire(f)
		}
	}
}

// OnChange reports the claims changed in any pool namespace.
func (l *namespacedLeases) OnChange(f func(vdi.Ref)) {
	for _, s := range l.by {
		if n, ok := s.(vdi.ChangeNotifier); ok {
			n.OnChange(f)
		}
	}
}

func (l *namespacedLeases) in(ns string) (vdi.Leases, error) {
	if s, ok := l.by[ns]; ok {
		return s, nil
	}
	if ns == l.lockNS && l.lockStore != nil {
		return l.lockStore, nil
	}
	return nil, errNotPoolNamespace(ns, l.names)
}

// Get returns a member's claim.
func (l *namespacedLeases) Get(ctx context.Context, ref vdi.Ref) (*vdi.Lease, error) {
	s, err := l.in(ref.Namespace)
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, ref)
}

// List returns the claims in namespace (every pool namespace when empty).
func (l *namespacedLeases) List(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	if namespace != "" {
		s, err := l.in(namespace)
		if err != nil {
			return nil, err
		}
		return s.List(ctx, namespace, pool)
	}
	var out []*vdi.Lease
	for _, ns := range l.names {
		ls, err := l.by[ns].List(ctx, ns, pool)
		if err != nil {
			return nil, err
		}
		out = append(out, ls...)
	}
	return out, nil
}

// Create makes a claim.
func (l *namespacedLeases) Create(ctx context.Context, in *vdi.Lease) (*vdi.Lease, error) {
	s, err := l.in(in.Namespace)
	if err != nil {
		return nil, err
	}
	return s.Create(ctx, in)
}

// Update changes a claim (compare-and-swap on its resourceVersion).
func (l *namespacedLeases) Update(ctx context.Context, in *vdi.Lease) (*vdi.Lease, error) {
	s, err := l.in(in.Namespace)
	if err != nil {
		return nil, err
	}
	return s.Update(ctx, in)
}

// Delete ends a claim.
func (l *namespacedLeases) Delete(ctx context.Context, in *vdi.Lease) error {
	s, err := l.in(in.Namespace)
	if err != nil {
		return err
	}
	return s.Delete(ctx, in)
}
