package vdi_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// running counts the pool's members that are powered on.
func running(p *leasetest.Pool, names ...string) int {
	n := 0
	for _, m := range names {
		if p.Power(m) == vdi.PowerRunning {
			n++
		}
	}
	return n
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStandby keeps a pool's warm standby: free members are started up to
// Standby (never more than there are), a claim takes a warm one and the
// loop refills, and a release frees a member that the standby uses again.
func TestStandby(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := leasetest.NewPool("local", "warm", 4, 0)
	pool.Standby = vdi.Fixed(2)
	pool.StartDelay = 50 * time.Millisecond
	svc := standbyService(t, ctx, pool, -1)
	names := []string{"warm-1", "warm-2", "warm-3", "warm-4"}

	if n, err := svc.KeepStandby(ctx); err != nil || n != 2 {
		t.Fatalf("KeepStandby on a cold pool started %d, %v; want 2", n, err)
	}
	if n, _ := svc.KeepStandby(ctx); n != 0 {
		t.Errorf("KeepStandby while those start started %d more; want 0 (starting counts as warm)", n)
	}
	waitFor(t, "2 members warm", func() bool { return running(pool, names...) == 2 })

	go svc.RunReclaimer(ctx, time.Hour) // refills on claims and releases, not on the tick
	d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "warm")
	if err != nil {
		t.Fatal(err)
	}
	if pool.Power(d.Name) != vdi.PowerRunning {
		t.Errorf("alice got %s (%s); want a warm member", d.Name, pool.Power(d.Name))
	}
	if c := svc.Counters(); c.ClaimsWarm != 1 || c.ClaimsCold != 0 {
		t.Errorf("counted %d warm and %d cold claims; want alice's, a standby hit", c.ClaimsWarm, c.ClaimsCold)
	}
	waitFor(t, "the standby refilled after the claim (3 running: alice's and 2 free)", func() bool { return running(pool, names...) == 3 })

	if _, err := svc.Claim(ctx, vdi.Identity{Login: "bob"}, "local", "warm"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Claim(ctx, vdi.Identity{Login: "carol"}, "local", "warm"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every member running: 3 claimed, the last one warm", func() bool { return running(pool, names...) == 4 })
	if n, _ := svc.KeepStandby(ctx); n != 0 {
		t.Errorf("KeepStandby with no free stopped member started %d; want 0 (never beyond the pool)", n)
	}

	// A release stops (and, ephemeral, recreates) the member: the standby
	// starts it again from fresh.
	if err := svc.Release(ctx, vdi.Identity{Login: "alice"}, d.Ref(), ""); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the released member warm again", func() bool { return pool.Power(d.Name) == vdi.PowerRunning })
}

// TestStandby_RefillWaitsForTheClaimedDesktop: after a claim takes the
// warm member, the refill waits the refill delay (the claimed desktop's
// console opens meanwhile, its cores not shared with a new desktop's
// start); the tick still refills.
func TestStandby_RefillWaitsForTheClaimedDesktop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := leasetest.NewPool("local", "warm", 2, 0)
	pool.Standby = vdi.Fixed(1)
	names := []string{"warm-1", "warm-2"}
	svc := standbyService(t, ctx, pool, time.Hour)
	go svc.RunReclaimer(ctx, time.Hour)
	waitFor(t, "1 member warm", func() bool { return running(pool, names...) == 1 })
	if _, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "warm"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // what an immediate refill would take
	if n := running(pool, names...); n != 1 {
		t.Errorf("%d members running right after the claim; want 1 (the claimed one, the refill waiting)", n)
	}
	if n, _ := svc.KeepStandby(ctx); n != 1 {
		t.Errorf("KeepStandby (as the tick) started %d; want 1", n)
	}
}

// standbyService is a Service of pool, its Leases in a fresh store, whose
// standby refills wait refill.
func standbyService(t *testing.T, ctx context.Context, pool *leasetest.Pool, refill time.Duration) *vdi.Service {
	t.Helper()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return vdi.NewService(vdi.Config{Backend: pool, Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler), RefillDelay: refill})
}
