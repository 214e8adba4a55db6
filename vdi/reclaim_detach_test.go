package vdi_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// recloner is a backend whose ephemeral resets are re-clones, as on
// Kubernetes (a PoolGrower): the re-clone of each member named in slow
// takes until the test closes gate; any other's ends at once.
type recloner struct {
	*poolBackend
	slow string
	gate chan struct{}

	mu     sync.Mutex
	fresh  []string // members whose re-clone ended
	cloned chan string
}

func (b *recloner) PlanCreate(context.Context, vdi.Pool) (vdi.Growth, error) {
	return vdi.Growth{}, vdi.ErrNotAJob
}
func (b *recloner) PlanResize(context.Context, string, string, int) (vdi.Growth, error) {
	return vdi.Growth{}, vdi.ErrNotAJob
}
func (b *recloner) PlanRecreate(_ context.Context, r vdi.Ref) (vdi.Growth, error) {
	return vdi.Growth{Pool: b.pool, Members: []string{r.Name}}, nil
}
func (b *recloner) Grow(ctx context.Context, g vdi.Growth, _ func(vdi.Progress)) error {
	name := g.Members[0]
	b.cloned <- name
	if name == b.slow {
		select {
		case <-b.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	b.mu.Lock()
	b.fresh = append(b.fresh, name)
	b.mu.Unlock()
	return nil
}

// TestReclaim_SlowCloneHoldsNoOneUp: the reclaim loop hands a re-clone to
// the same detached path a release uses (its plan on the mark first), so
// while one member's clone hangs, ReclaimDue returns and another member
// reclaimed in the same round is fresh and free; the slow one stays
// marked, resetting, until its clone ends.
func TestReclaim_SlowCloneHoldsNoOneUp(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	b := &recloner{poolBackend: newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"), slow: "demo-1",
		gate: make(chan struct{}), cloned: make(chan string, 4)}
	svc, db := newServiceWithPolicy(t, b, &now, vdi.Policy{DisconnectGrace: time.Minute})
	t.Cleanup(svc.StopJobs)
	let := sync.OnceFunc(func() { close(b.gate) })
	t.Cleanup(let) // before StopJobs: the slow clone ends first
	for _, user := range []string{"alice", "bob"} {
		if _, err := svc.Claim(ctx, vdi.Identity{Login: user}, "local", "demo"); err != nil {
			t.Fatalf("%s's claim: %v", user, err)
		}
	}
	now = now.Add(2 * time.Minute) // both past their grace

	reclaimed := make(chan error, 1)
	go func() {
		n, err := svc.ReclaimDue(ctx)
		if err == nil && n != 2 {
			err = fmt.Errorf("ReclaimDue reclaimed %d; want 2", n)
		}
		reclaimed <- err
	}()
	select {
	case err := <-reclaimed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("ReclaimDue still waits after 1 min while demo-1's clone hangs; want it to hand the clones off")
	}
	// demo-2's reset ends (its lease gone) while demo-1's still hangs.
	waitLeaseGone(t, db.Leases(), vdi.Ref{Namespace: "local", Name: "demo-2"})
	l, err := db.Leases().Get(ctx, vdi.Ref{Namespace: "local", Name: "demo-1"})
	if err != nil || l.Annotations[vdi.AnnotationReclaiming] != vdi.RuleDisconnect || l.Annotations[vdi.AnnotationReset] == "" {
		t.Fatalf("demo-1's claim while its clone hangs: %+v, %v; want it marked with its rule and plan", l, err)
	}
	if d, err := svc.Desktop(ctx, vdi.Identity{Login: "ops", Admin: true}, l.Ref()); err != nil || d.Resetting != vdi.RuleDisconnect {
		t.Errorf("demo-1 while its clone hangs: %+v, %v; want it resetting (%s)", d, err, vdi.RuleDisconnect)
	}
	// The loop, run again meanwhile, starts no second clone of it.
	if n, err := svc.ReclaimDue(ctx); err != nil || n != 0 {
		t.Errorf("ReclaimDue again while demo-1 resets = %d, %v; want 0", n, err)
	}
	let()
	waitLeaseGone(t, db.Leases(), l.Ref())
	if got := len(b.cloned); got != 2 {
		t.Errorf("%d clones started; want one per member", got)
	}
}

// slowStop is a VM pool on a cluster (a PoolGrower) whose members' stop
// takes until the test closes gate, as a guest's shutdown does.
type slowStop struct {
	*recloner
	stopping chan string
}

func (b *slowStop) Stop(ctx context.Context, r vdi.Ref) error {
	b.stopping <- r.Name
	select {
	case <-b.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.recloner.Stop(ctx, r)
}

// TestRelease_PersistentVMAnswersAtOnce: releasing a persistent VM on a
// cluster answers once the claim is marked, while its guest still shuts
// down; meanwhile the member is resetting (its holder's no more, nobody
// else's yet), and free once the stop ends.
func TestRelease_PersistentVMAnswersAtOnce(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	b := &slowStop{recloner: &recloner{poolBackend: newPoolBackend(vdi.ModePersistent, "demo-1"), gate: make(chan struct{}), cloned: make(chan string, 1)},
		stopping: make(chan string, 2)}
	b.pool.Kind = vdi.KindVM
	svc, db := newService(t, b, &now)
	t.Cleanup(svc.StopJobs)
	let := sync.OnceFunc(func() { close(b.gate) })
	t.Cleanup(let)
	alice := vdi.Identity{Login: "alice"}
	d, err := svc.Claim(ctx, alice, "local", "demo")
	if err != nil {
		t.Fatal(err)
	}
	released := make(chan error, 1)
	go func() { released <- svc.Release(ctx, alice, d.Ref(), "") }()
	select {
	case err := <-released:
		if err != nil {
			t.Fatalf("alice's release: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("alice's release still waits for the guest's shutdown after 1 min; want it answered at once")
	}
	<-b.stopping
	if got, err := svc.Desktop(ctx, vdi.Identity{Login: "ops", Admin: true}, d.Ref()); err != nil || got.Resetting != "release" || got.Holder != "" {
		t.Errorf("demo-1 while it stops: %+v, %v; want it resetting (release) with no holder", got, err)
	}
	if mine, err := svc.Desktops(ctx, alice, false); err != nil || len(mine) != 0 {
		t.Errorf("alice's desktops while hers stops: %+v, %v; want none", mine, err)
	}
	let()
	waitLeaseGone(t, db.Leases(), d.Ref())
}

// waitLeaseGone waits until ref's claim is let go, as a reset that ended
// lets it go.
func waitLeaseGone(t *testing.T, leases vdi.Leases, ref vdi.Ref) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		_, err := leases.Get(context.Background(), ref)
		if errors.Is(err, vdi.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claim on %s after 1 min: %v; want it let go once its reset ended", ref, err)
		}
	}
}
