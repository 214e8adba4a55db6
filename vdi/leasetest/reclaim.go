package leasetest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// testReclaim checks the reclaim rules through vdi.Service with an
// injected clock: each rule, a reconnect inside the grace, the deadline
// surviving a portal restart (another instance reads the same Lease), a
// reclaim at work elsewhere left alone, and two replicas reclaiming one due
// claim exactly once.
func testReclaim(t *testing.T, s Store) {
	ctx := context.Background()
	alice := vdi.Identity{Login: "alice"}
	var mu sync.Mutex
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	start := func(t *testing.T, pool *Pool, policy vdi.Policy) *vdi.Service {
		return vdi.NewService(vdi.Config{Backend: pool, Leases: s.Open(t), Audit: nopAudit{}, Now: clock,
			Policy: policy, Log: slog.New(slog.DiscardHandler)})
	}
	reclaim := func(t *testing.T, svc *vdi.Service, want int) {
		t.Helper()
		if n, err := svc.ReclaimDue(ctx); err != nil || n != want {
			t.Fatalf("ReclaimDue at t0+%v = %d, %v; want %d", clock().Sub(t0), n, err, want)
		}
	}
	claim := func(t *testing.T, svc *vdi.Service, pool string) vdi.Ref {
		t.Helper()
		d, err := svc.Claim(ctx, alice, s.Namespace, pool)
		if err != nil {
			t.Fatal(err)
		}
		return d.Ref()
	}
	gone := func(t *testing.T, leases vdi.Leases, ref vdi.Ref) {
		t.Helper()
		if _, err := leases.Get(ctx, ref); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("claim of %s after reclaim: %v; want it gone", ref, err)
		}
	}

	t.Run("DisconnectGraceSurvivesARestart", func(t *testing.T) {
		pool := NewPool(s.Namespace, "grace", 1, 0)
		policy := vdi.Policy{DisconnectGrace: 15 * time.Minute}
		first := start(t, pool, policy)
		ref := claim(t, first, "grace")
		first.ConsoleOpened(ctx, ref)
		advance(50 * time.Minute)
		first.ConsoleHeartbeat(ctx, ref)
		first.ConsoleClosed(ctx, ref)
		// The portal restarts: a new instance reads the facts from the Lease.
		second := start(t, pool, policy)
		advance(15*time.Minute - time.Second)
		reclaim(t, second, 0)
		advance(time.Second)
		reclaim(t, second, 1)
		gone(t, s.Open(t), ref)
		if pool.Power(ref.Name) != vdi.PowerStopped {
			t.Errorf("reclaimed member is %s; want stopped", pool.Power(ref.Name))
		}
	})
	t.Run("ReconnectInsideGrace", func(t *testing.T) {
		pool := NewPool(s.Namespace, "back", 1, 0)
		svc := start(t, pool, vdi.Policy{DisconnectGrace: 15 * time.Minute})
		ref := claim(t, svc, "back")
		svc.ConsoleOpened(ctx, ref)
		svc.ConsoleClosed(ctx, ref)
		advance(10 * time.Minute)
		svc.ConsoleOpened(ctx, ref)
		advance(10 * time.Minute)
		svc.ConsoleHeartbeat(ctx, ref)
		reclaim(t, svc, 0)
	})
	t.Run("IdleFromInputOnly", func(t *testing.T) {
		pool := NewPool(s.Namespace, "idle", 1, 0)
		svc := start(t, pool, vdi.Policy{IdleTimeout: 30 * time.Minute})
		ref := claim(t, svc, "idle")
		svc.ConsoleOpened(ctx, ref)
		advance(20 * time.Minute)
		svc.Input(ctx, ref, clock())
		advance(29 * time.Minute)
		svc.ConsoleHeartbeat(ctx, ref) // frames and heartbeats are not input
		reclaim(t, svc, 0)
		advance(time.Minute)
		reclaim(t, svc, 1)
	})
	t.Run("MaxSession", func(t *testing.T) {
		pool := NewPool(s.Namespace, "max", 1, 0)
		svc := start(t, pool, vdi.Policy{MaxSession: 2 * time.Hour})
		ref := claim(t, svc, "max")
		svc.ConsoleOpened(ctx, ref)
		for range 3 {
			advance(40 * time.Minute)
			svc.Input(ctx, ref, clock())
		}
		reclaim(t, svc, 1)
	})
	t.Run("MarkedLeftAloneUntilStale", func(t *testing.T) {
		// A Lease marked by a release or reclaim at work elsewhere (another
		// replica, which renews its mark every 5 s) is not reclaimed again;
		// a mark left by a crash is, once it is 30 s old.
		pool := NewPool(s.Namespace, "marked", 1, 0)
		leases := s.Open(t)
		svc := vdi.NewService(vdi.Config{Backend: pool, Leases: leases, Audit: nopAudit{}, Now: clock,
			Log: slog.New(slog.DiscardHandler)})
		ref := claim(t, svc, "marked")
		l, err := leases.Get(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		marked := *l
		marked.Annotations = map[string]string{vdi.AnnotationReclaiming: "release"}
		marked.RenewTime = clock()
		if _, err := leases.Update(ctx, &marked); err != nil {
			t.Fatal(err)
		}
		reclaim(t, svc, 0)
		advance(20 * time.Second)
		reclaim(t, svc, 0)
		advance(15 * time.Second)
		reclaim(t, svc, 1)
		gone(t, leases, ref)
	})
	t.Run("TwoReplicasReclaimOnce", func(t *testing.T) {
		pool := NewPool(s.Namespace, "twice", 1, 0)
		policy := vdi.Policy{DisconnectGrace: time.Minute}
		a, b := start(t, pool, policy), start(t, pool, policy)
		claim(t, a, "twice")
		advance(2 * time.Minute)
		var wg sync.WaitGroup
		var n [2]int
		for i, svc := range []*vdi.Service{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				n[i], _ = svc.ReclaimDue(ctx)
			}()
		}
		wg.Wait()
		if n[0]+n[1] != 1 {
			t.Errorf("two replicas reclaimed %d and %d times; want once in all", n[0], n[1])
		}
	})
}
