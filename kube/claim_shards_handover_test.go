package kube_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"
	fakeclock "k8s.io/utils/clock/testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// A shard handed over, with the replicas' shard clocks standing still:
// only the shard's Lease changing (the watch) moves them, so each test
// fails for good, not by a bound, without what it pins.

// shardRenew is vdi's: a step of a replica's clock by it runs its pass.
const shardRenew = 2 * time.Second

// TestClaimsByShard_HandOverAtOnce: the replica that should hold a shard
// takes it as soon as its holder lets it go (the Lease's delete), not at
// its next pass: r1's clock stands still, so without the wake it never
// takes the shards r0 gave up (in the soak, claims waited up to a pass,
// 550-830 ms, as the replicas joined).
func TestClaimsByShard_HandOverAtOnce(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 6, 6), 0)
	c0, c1 := fakeclock.NewFakeClock(time.Now()), fakeclock.NewFakeClock(time.Now())
	f.clocks = map[string]clock.WithTicker{"r0": c0, "r1": c1}
	f.start("r0", mustLeases(t, c.Config), v)
	waitShards(t, c, ns, "r0")
	f.start("r1", mustLeases(t, c.Config), v)
	v.set("r1")
	c0.Step(shardRenew) // r0's pass: it gives every shard up
	waitShards(t, c, ns, "r1")
}

// TestClaimsByShard_ClaimWaitsForTheHolder: a claim that finds no holder
// of its user's shard goes on as soon as a replica takes it (the Lease's
// create), not after its next pause: r0's clock stands still, so without
// the wake alice's claim there waits out its whole bound.
func TestClaimsByShard_ClaimWaitsForTheHolder(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 6, 6), 0)
	c0 := fakeclock.NewFakeClock(time.Now())
	f.clocks = map[string]clock.WithTicker{"r0": c0}
	looks := &shardLooks{Leases: mustLeases(t, c.Config)}
	r0 := f.start("r0", looks, v)
	waitShards(t, c, ns, "r0")
	v.set("r1") // r1 is not running yet
	c0.Step(shardRenew)
	waitShardsGone(t, c, ns)

	n := looks.n.Load()
	answer := make(chan error, 1)
	go func() {
		_, err := r0.Claim(context.Background(), vdi.Identity{Login: "alice"}, ns, "p")
		answer <- err
	}()
	for looks.n.Load() == n { // her claim looked for her shard's holder and found none
		select {
		case err := <-answer:
			t.Fatalf("alice's claim with no holder of her shard: %v; want it to wait for one", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	f.start("r1", mustLeases(t, c.Config), v)
	if err := <-answer; err != nil {
		t.Errorf("alice's claim at r0 once r1 took her shard: %v; want her desktop, without a pause of r0's still clock", err)
	}
}

// shardLooks counts the reads of claim shards' Leases.
type shardLooks struct {
	vdi.Leases
	n atomic.Int64
}

func (l *shardLooks) Get(ctx context.Context, ref vdi.Ref) (*vdi.Lease, error) {
	if strings.HasPrefix(ref.Name, "claimshard-") {
		l.n.Add(1)
	}
	return l.Leases.Get(ctx, ref)
}

func (l *shardLooks) OnChange(f func(vdi.Ref)) { l.Leases.(vdi.ChangeNotifier).OnChange(f) }

// waitShardsGone waits until no claim shard in ns has a Lease.
func waitShardsGone(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	leases := mustLeases(t, c.Config)
	for range 600 {
		if list, err := leases.List(context.Background(), ns, "claim.shard"); err == nil && len(list) == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the claim shards' Leases are still there after a minute")
}
