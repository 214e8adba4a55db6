package leasetest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Pool is a test stand-in backend with one pool whose members power on in
// StartDelay (and fail to while FailStart is set). The claim rules under
// test live in vdi.Service and the Leases store; this only answers them.
type Pool struct {
	Namespace, Name string
	StartDelay      time.Duration
	// Access is who may use the pool (vdi.Pool.Access).
	Access vdi.Access
	// Standby and StandbySchedule are the pool's warm standby
	// (vdi.Pool.Standby, vdi.Pool.StandbySchedule).
	Standby         vdi.Standby
	StandbySchedule vdi.StandbySchedule
	// OnStart, when set, is called as Start begins (a test's clock may
	// advance by the start time it plays).
	OnStart func(member string)
	// Policy is the pool's policy (vdi.Pool.Policy).
	Policy vdi.Policy

	mu         sync.Mutex
	names      []string
	power      map[string]vdi.Power
	assigned   map[string]string
	failStart  bool
	failMirror bool
}

var (
	_ vdi.Backend     = (*Pool)(nil)
	_ vdi.ClaimMirror = (*Pool)(nil)
)

// NewPool returns a pool of members name-1..name-n in namespace; the first
// running of them are running, the rest stopped.
func NewPool(namespace, name string, n, running int) *Pool {
	p := &Pool{Namespace: namespace, Name: name, power: map[string]vdi.Power{}, assigned: map[string]string{}}
	for i := 1; i <= n; i++ {
		m := fmt.Sprintf("%s-%d", name, i)
		p.names = append(p.names, m)
		p.power[m] = vdi.PowerStopped
		if i <= running {
			p.power[m] = vdi.PowerRunning
		}
	}
	return p
}

// SetFailStart makes Start fail (true) or work again (false).
func (p *Pool) SetFailStart(fail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failStart = fail
}

// SetFailMirror makes MirrorClaim fail (true) or work again (false).
func (p *Pool) SetFailMirror(fail bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failMirror = fail
}

// AssignedTo returns whom the member is shown as assigned to.
func (p *Pool) AssignedTo(member string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.assigned[member]
}

// MirrorClaim implements vdi.ClaimMirror.
func (p *Pool) MirrorClaim(_ context.Context, r vdi.Ref, holder string, _ time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failMirror {
		return errors.New("leasetest: mirror failed as the test asked")
	}
	p.assigned[r.Name] = holder
	return nil
}

// Power returns the member's power state.
func (p *Pool) Power(member string) vdi.Power {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.power[member]
}

// Pools implements vdi.Backend.
func (p *Pool) Pools(ctx context.Context) ([]vdi.Pool, error) {
	pl, err := p.Pool(ctx, p.Namespace, p.Name)
	return []vdi.Pool{pl}, err
}

// Pool implements vdi.Backend.
func (p *Pool) Pool(_ context.Context, namespace, name string) (vdi.Pool, error) {
	if namespace != p.Namespace || name != p.Name {
		return vdi.Pool{}, vdi.Errorf(vdi.ENotFound, "", "No pool %s/%s.", namespace, name)
	}
	return vdi.Pool{Namespace: p.Namespace, Name: p.Name, Kind: vdi.KindVM, Mode: vdi.ModePersistent, Size: len(p.names), Access: p.Access, Standby: p.Standby, StandbySchedule: p.StandbySchedule, Policy: p.Policy}, nil
}

// Members implements vdi.Backend.
func (p *Pool) Members(ctx context.Context, _, _ string) ([]vdi.Member, error) {
	out := make([]vdi.Member, 0, len(p.names))
	for _, n := range p.names {
		m, _ := p.Member(ctx, vdi.Ref{Namespace: p.Namespace, Name: n})
		out = append(out, m)
	}
	return out, nil
}

// Member implements vdi.Backend.
func (p *Pool) Member(_ context.Context, r vdi.Ref) (vdi.Member, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pw, ok := p.power[r.Name]
	if !ok || r.Namespace != p.Namespace {
		return vdi.Member{}, vdi.Errorf(vdi.ENotFound, "", "No desktop %s.", r)
	}
	return vdi.Member{Namespace: r.Namespace, Name: r.Name, Pool: p.Name, Power: pw, Shown: p.assigned[r.Name]}, nil
}

// Start implements vdi.Backend.
func (p *Pool) Start(ctx context.Context, r vdi.Ref) error {
	if p.OnStart != nil {
		p.OnStart(r.Name)
	}
	select {
	case <-time.After(p.StartDelay):
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.failStart {
		return errors.New("leasetest: start failed as the test asked")
	}
	p.power[r.Name] = vdi.PowerRunning
	return nil
}

// Stop implements vdi.Backend.
func (p *Pool) Stop(_ context.Context, r vdi.Ref) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.power[r.Name] = vdi.PowerStopped
	return nil
}

// Recreate implements vdi.Backend.
func (p *Pool) Recreate(ctx context.Context, r vdi.Ref) error { return p.Stop(ctx, r) }

// Dial implements vdi.Backend; the stand-in has no consoles.
func (p *Pool) Dial(context.Context, vdi.Ref, vdi.Protocol) (net.Conn, error) {
	return nil, errors.New("leasetest: no consoles")
}

// nopAudit drops audit events; the suite checks Leases, not the audit log.
type nopAudit struct{}

func (nopAudit) Record(context.Context, vdi.AuditEvent) error { return nil }

// auditLog keeps audit events in memory.
type auditLog struct {
	mu     sync.Mutex
	events []vdi.AuditEvent
}

func (a *auditLog) Record(_ context.Context, e vdi.AuditEvent) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.events = append(a.events, e)
	return nil
}

// has reports whether an event with action by actor on target was recorded.
func (a *auditLog) has(action, actor, target string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.events {
		if e.Action == action && e.Actor == actor && e.Target == target {
			return true
		}
	}
	return false
}

// Pools is several Pools as one backend, for rules that span pools (the
// per-user quota).
type Pools []*Pool

var _ vdi.Backend = Pools(nil)

// of returns the pool named name, or the one that has member.
func (ps Pools) of(name, member string) (*Pool, error) {
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
		p.mu.Lock()
		_, ok := p.power[member]
		p.mu.Unlock()
		if ok {
			return p, nil
		}
	}
	return nil, vdi.Errorf(vdi.ENotFound, "", "No pool %s or desktop %s.", name, member)
}

// Pools implements vdi.Backend.
func (ps Pools) Pools(ctx context.Context) ([]vdi.Pool, error) {
	var out []vdi.Pool
	for _, p := range ps {
		pl, _ := p.Pool(ctx, p.Namespace, p.Name)
		out = append(out, pl)
	}
	return out, nil
}

// Pool implements vdi.Backend.
func (ps Pools) Pool(ctx context.Context, namespace, name string) (vdi.Pool, error) {
	p, err := ps.of(name, "")
	if err != nil {
		return vdi.Pool{}, err
	}
	return p.Pool(ctx, namespace, name)
}

// Members implements vdi.Backend.
func (ps Pools) Members(ctx context.Context, namespace, pool string) ([]vdi.Member, error) {
	p, err := ps.of(pool, "")
	if err != nil {
		return nil, err
	}
	return p.Members(ctx, namespace, pool)
}

// Member implements vdi.Backend.
func (ps Pools) Member(ctx context.Context, r vdi.Ref) (vdi.Member, error) {
	p, err := ps.of("", r.Name)
	if err != nil {
		return vdi.Member{}, err
	}
	return p.Member(ctx, r)
}

// Start implements vdi.Backend.
func (ps Pools) Start(ctx context.Context, r vdi.Ref) error {
	p, err := ps.of("", r.Name)
	if err != nil {
		return err
	}
	return p.Start(ctx, r)
}

// Stop implements vdi.Backend.
func (ps Pools) Stop(ctx context.Context, r vdi.Ref) error {
	p, err := ps.of("", r.Name)
	if err != nil {
		return err
	}
	return p.Stop(ctx, r)
}

// Recreate implements vdi.Backend.
func (ps Pools) Recreate(ctx context.Context, r vdi.Ref) error { return ps.Stop(ctx, r) }

// Dial implements vdi.Backend; the stand-in has no consoles.
func (ps Pools) Dial(context.Context, vdi.Ref, vdi.Protocol) (net.Conn, error) {
	return nil, errors.New("leasetest: no consoles")
}
