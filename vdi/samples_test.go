package vdi_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestSamplePools_TwoReplicas: two portals sharing one database and one
// pool sample it; the pool's bucket holds the peak seen by either, each
// refusal and reclaim once (whichever replica made it), and sampling again
// with nothing new adds nothing.
func TestSamplePools_TwoReplicas(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	t0 := time.Unix(1_800_000_000, 0).Truncate(vdi.SampleBucket)
	now := t0
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); defer mu.Unlock(); now = now.Add(d) }
	pool := leasetest.NewPool("local", "lab", 3, 1)
	replica := func() *vdi.Service {
		return vdi.NewService(vdi.Config{Backend: pool, Leases: db.Leases(), Audit: db, Now: clock, Samples: db,
			Policy: vdi.Policy{MaxSession: 2 * time.Minute}, Log: slog.New(slog.DiscardHandler)})
	}
	a, b := replica(), replica()
	sample := func(t *testing.T) {
		t.Helper()
		for _, r := range []*vdi.Service{a, b} {
			if err := r.SamplePools(ctx); err != nil {
				t.Fatalf("SamplePools: %v", err)
			}
		}
	}
	sample(t) // one warm member, none claimed
	for i, r := range []*vdi.Service{a, b, a} {
		if _, err := r.Claim(ctx, vdi.Identity{Login: []string{"alice", "bob", "carol"}[i]}, "local", "lab"); err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
	}
	for i, r := range []*vdi.Service{b, a} {
		if _, err := r.Claim(ctx, vdi.Identity{Login: []string{"dave", "erin"}[i]}, "local", "lab"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Fatalf("claim %d of a full pool: %v; want EConflict (no free member)", i, err)
		}
	}
	sample(t)
	advance(3 * time.Minute) // past the max session, same bucket
	reclaimed := 0
	for _, r := range []*vdi.Service{a, b} {
		n, err := r.ReclaimDue(ctx)
		if err != nil {
			t.Fatal(err)
		}
		reclaimed += n
	}
	if reclaimed != 3 {
		t.Fatalf("the replicas reclaimed %d; want the 3 claims once each", reclaimed)
	}
	sample(t)
	sample(t) // nothing new: adds nothing

	got, err := db.PoolSamples(ctx, t0, vdi.SampleBucket)
	if err != nil {
		t.Fatal(err)
	}
	want := vdi.PoolSample{Namespace: "local", Pool: "lab", Start: t0, Size: 3, Claimed: 3, Free: 0, Warm: 1, Refused: 2}
	want.Reclaims[1] = 3 // ReclaimRules[1]: max-session
	if vdi.ReclaimRules[1] != vdi.RuleMaxSession || len(got) != 1 || !got[0].Start.Equal(want.Start) {
		t.Fatalf("samples = %+v; want one bucket at %v", got, t0)
	}
	got[0].Start = want.Start
	if got[0] != want {
		t.Errorf("bucket = %+v\nwant      %+v", got[0], want)
	}

	// The next bucket, then both read as one hour.
	advance(vdi.SampleBucket)
	if _, err := b.Claim(ctx, vdi.Identity{Login: "frank"}, "local", "lab"); err != nil {
		t.Fatal(err)
	}
	sample(t)
	got, err = db.PoolSamples(ctx, t0, vdi.SampleBucket)
	if err != nil || len(got) != 2 || got[1].Claimed != 1 || got[1].Refused != 0 || got[1].Reclaims != [len(vdi.ReclaimRules)]int{} {
		t.Fatalf("5-minute samples = %+v, %v; want a second bucket with frank's claim, no counts", got, err)
	}
	hourly, err := db.PoolSamples(ctx, t0.Add(-time.Hour), time.Hour)
	if err != nil || len(hourly) != 1 && len(hourly) != 2 {
		t.Fatalf("hourly samples = %+v, %v", hourly, err)
	}
	var refused, reclaims int
	for _, h := range hourly {
		refused += h.Refused
		reclaims += h.Reclaims[1]
	}
	if refused != 2 || reclaims != 3 {
		t.Errorf("hourly: %d refused, %d reclaims; want 2 and 3", refused, reclaims)
	}
}
