package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/clock"
	fakeclock "k8s.io/utils/clock/testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimsByShard_HolderFromTheCache: a claim at a replica that does not
// hold its user's shard finds the holder in its Lease cache, which the
// shards' watch keeps, not by asking the API server (one request per
// forwarded claim: about 670 in the soak's morning storm, each on the
// claim's way to its Lease). The replicas' clocks stand still, so no
// pass reads a shard while the claims run, and every read counted is a
// claim's.
func TestClaimsByShard_HolderFromTheCache(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0", "r1")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 10, 10), 0)
	c0, c1 := fakeclock.NewFakeClock(time.Now()), fakeclock.NewFakeClock(time.Now())
	f.clocks = map[string]clock.WithTicker{"r0": c0, "r1": c1}
	f.nows = map[string]func() time.Time{"r0": c0.Now, "r1": c1.Now}
	looks := &shardLooks{Leases: mustLeases(t, c.Config)}
	r0 := f.start("r0", looks, v)
	f.start("r1", mustLeases(t, c.Config), v)

	// r1's shards, once r0's cache shows every shard held.
	theirs := map[int]bool{}
	for end := time.Now().Add(time.Minute); len(theirs) == 0; time.Sleep(50 * time.Millisecond) {
		list, err := looks.List(context.Background(), ns, vdi.ShardPool)
		if err == nil && len(list) == vdi.DefaultShardCount {
			for _, l := range list {
				var k int
				if _, err := fmt.Sscanf(l.Member, "claimshard-%d", &k); err == nil && l.Holder == "r1" {
					theirs[k] = true
				}
			}
			if len(theirs) == 0 {
				t.Fatalf("r0 holds every claim shard (%s); want some r1's, the view being r0 and r1", shardHolders(t, c, ns))
			}
		} else if time.Now().After(end) {
			t.Fatalf("r0's cache shows %d claim shards after a minute (%v); want %d: %s", len(list), err, vdi.DefaultShardCount, shardHolders(t, c, ns))
		}
	}

	before := looks.n.Load()
	claimed := 0
	for i := 0; claimed < 5; i++ {
		login := fmt.Sprintf("u%d", i)
		if !theirs[vdi.ShardOf(login, vdi.DefaultShardCount)] {
			continue
		}
		if _, err := r0.Claim(context.Background(), vdi.Identity{Login: login}, ns, "p"); err != nil {
			t.Fatalf("%s's claim at r0, her shard r1's: %v", login, err)
		}
		claimed++
	}
	if n := looks.n.Load() - before; n != 0 {
		t.Errorf("5 claims forwarded from r0 to r1 read claim shards' Leases from the API server %d times; want 0 (the holder from r0's cache)", n)
	}
}
