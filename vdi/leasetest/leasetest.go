// Package leasetest is the conformance suite every vdi.Leases
// implementation passes: the compare-and-swap contract, and claims through
// vdi.Service racing across several portal instances and processes, with a
// crash in the middle and stale Leases taken over by two at once, and the
// reclaim rules with an injected clock.
//
// An implementation's test calls Run with a function that makes a fresh,
// empty store; its TestMain calls MaybeChild first so the suite can start
// portals as child processes of the test binary.
package leasetest

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Store is one fresh, empty claim store under test.
type Store struct {
	// Namespace holds the suite's members; nothing else uses it.
	Namespace string
	// Open returns a new, independent client of the store, as one more
	// portal instance would have (its own connection and cache), ready to
	// use; it is closed when tb ends.
	Open func(tb testing.TB) vdi.Leases
	// Child is handed to the opener given to MaybeChild in a child process,
	// to open a client of this same store there.
	Child string
	// Replicas, when set, starts one more portal instance's heartbeat
	// named name (the kube backend's) and returns its view of the live
	// replicas, running until tb ends: the claim benchmarks give it to
	// their portals (vdi.Config.Replicas).
	Replicas func(tb testing.TB, name string) vdi.Replicas
	// Shards runs the child portals' claims by shard (the test binary's
	// TestMain calls MaybeChildSharded).
	Shards bool
}

// Run runs the suite; newStore makes a fresh, empty store for each test.
func Run(t *testing.T, newStore func(t *testing.T) Store) {
	t.Run("Contract", func(t *testing.T) { testContract(t, newStore(t)) })
	t.Run("Claim", func(t *testing.T) { testClaim(t, newStore(t)) })
	t.Run("StaleTakeover", func(t *testing.T) { testStaleTakeover(t, newStore(t)) })
	t.Run("Race", func(t *testing.T) { testRace(t, newStore(t)) })
	t.Run("Crash", func(t *testing.T) { testCrash(t, newStore(t)) })
	t.Run("Reclaim", func(t *testing.T) { testReclaim(t, newStore(t)) })
	t.Run("OneUserRace", func(t *testing.T) { testOneUserRace(t, newStore(t)) })
	t.Run("Access", func(t *testing.T) { testAccess(t, newStore(t)) })
}

// t0 is the suite's clock origin, in whole seconds: Kubernetes keeps times
// to the microsecond.
var t0 = time.Unix(1_800_000_000, 0)

func lease(ns, member, holder string, at time.Time) *vdi.Lease {
	return &vdi.Lease{Namespace: ns, Member: member, Pool: "contract", Holder: holder,
		AcquireTime: at, RenewTime: at, Duration: time.Hour,
		Annotations: map[string]string{"corral.dev/vdi-open-consoles": "0"}}
}

func testContract(t *testing.T, s Store) {
	ctx := context.Background()
	leases := s.Open(t)
	ns := s.Namespace

	t.Run("CreateThenGet", func(t *testing.T) {
		created, err := leases.Create(ctx, lease(ns, "m-get", "alice", t0))
		if err != nil {
			t.Fatal(err)
		}
		if created.ResourceVersion == "" {
			t.Error("Create returned no resource version")
		}
		got, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: "m-get"})
		if err != nil {
			t.Fatal(err)
		}
		want := lease(ns, "m-get", "alice", t0)
		if got.Holder != want.Holder || got.Pool != want.Pool || got.Member != want.Member || got.Namespace != ns ||
			!got.AcquireTime.Equal(t0) || !got.RenewTime.Equal(t0) || got.Duration != time.Hour ||
			got.ResourceVersion != created.ResourceVersion || !maps.Equal(got.Annotations, want.Annotations) {
			t.Errorf("Get = %+v; want what Create stored: %+v at version %s", got, want, created.ResourceVersion)
		}
	})
	t.Run("ErrAlreadyExists", func(t *testing.T) {
		if _, err := leases.Create(ctx, lease(ns, "m-dup", "alice", t0)); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Create(ctx, lease(ns, "m-dup", "bob", t0)); !errors.Is(err, vdi.ErrAlreadyExists) {
			t.Errorf("second Create: %v; want ErrAlreadyExists", err)
		}
		if got, _ := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: "m-dup"}); got == nil || got.Holder != "alice" {
			t.Errorf("after a lost Create the holder is %+v; want alice", got)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := leases.Get(ctx, vdi.Ref{Namespace: ns, Name: "m-none"}); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Get of nothing: %v; want ErrNotFound", err)
		}
	})
	t.Run("UpdateIsCompareAndSwap", func(t *testing.T) {
		first, err := leases.Create(ctx, lease(ns, "m-cas", "alice", t0))
		if err != nil {
			t.Fatal(err)
		}
		renewed := *first
		renewed.RenewTime = t0.Add(time.Minute)
		renewed.Annotations = map[string]string{"corral.dev/vdi-open-consoles": "1"}
		second, err := leases.Update(ctx, &renewed)
		if err != nil {
			t.Fatal(err)
		}
		if second.ResourceVersion == first.ResourceVersion {
			t.Errorf("Update kept resource version %s; want a new one", first.ResourceVersion)
		}
		got, _ := leases.Get(ctx, first.Ref())
		if got == nil || !got.RenewTime.Equal(t0.Add(time.Minute)) || got.Annotations["corral.dev/vdi-open-consoles"] != "1" {
			t.Errorf("after Update Get = %+v; want the renewal and the new annotation", got)
		}
		stale := *first
		stale.Holder = "bob"
		if _, err := leases.Update(ctx, &stale); !errors.Is(err, vdi.ErrConflict) {
			t.Errorf("Update with stale version: %v; want ErrConflict", err)
		}
		if err := leases.Delete(ctx, first); !errors.Is(err, vdi.ErrConflict) {
			t.Errorf("Delete with stale version: %v; want ErrConflict", err)
		}
		if err := leases.Delete(ctx, second); err != nil {
			t.Fatalf("Delete with current version: %v", err)
		}
		if _, err := leases.Get(ctx, first.Ref()); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Get after Delete: %v; want ErrNotFound", err)
		}
		if err := leases.Delete(ctx, second); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("second Delete: %v; want ErrNotFound", err)
		}
		if _, err := leases.Update(ctx, second); !errors.Is(err, vdi.ErrConflict) {
			t.Errorf("Update of a deleted Lease: %v; want ErrConflict", err)
		}
		// A renewal racing a release must not bring the claim back.
		if got, err := leases.Get(ctx, first.Ref()); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Get after an Update of the deleted Lease: %+v, %v; want ErrNotFound", got, err)
		}
	})
	t.Run("ListFiltersAndSeesOwnWrites", func(t *testing.T) {
		for _, c := range []struct{ member, holder, pool string }{
			{"m-list-1", "alice", "listed"}, {"m-list-2", "bob", "listed"}, {"m-other", "carol", "other"},
		} {
			l := lease(ns, c.member, c.holder, t0)
			l.Pool = c.pool
			if _, err := leases.Create(ctx, l); err != nil {
				t.Fatal(err)
			}
		}
		// The same instance lists its own writes at once, whatever it caches.
		got, err := leases.List(ctx, ns, "listed")
		if err != nil {
			t.Fatal(err)
		}
		holders := map[string]string{}
		for _, l := range got {
			holders[l.Member] = l.Holder
		}
		if want := map[string]string{"m-list-1": "alice", "m-list-2": "bob"}; !maps.Equal(holders, want) {
			t.Errorf("List(%s, listed) = %v; want %v", ns, holders, want)
		}
		all, err := leases.List(ctx, ns, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(all) < 3 {
			t.Errorf("List(%s, all pools) has %d Leases; want at least 3", ns, len(all))
		}
		if got, err := leases.List(ctx, ns+"-elsewhere", "listed"); err != nil || len(got) != 0 {
			t.Errorf("List in another namespace = %d Leases, %v; want none", len(got), err)
		}
	})
	t.Run("OtherInstanceSeesWrites", func(t *testing.T) {
		second := s.Open(t)
		if _, err := leases.Create(ctx, lease(ns, "m-seen", "alice", t0)); err != nil {
			t.Fatal(err)
		}
		got, err := second.Get(ctx, vdi.Ref{Namespace: ns, Name: "m-seen"})
		if err != nil || got.Holder != "alice" {
			t.Fatalf("second instance Get = %+v, %v; want alice's Lease", got, err)
		}
		// A cache may lag, but not for long.
		deadline := time.Now().Add(10 * time.Second)
		for {
			list, err := second.List(ctx, ns, "contract")
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range list {
				if l.Member == "m-seen" {
					return
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("second instance's List never showed m-seen: %d Leases", len(list))
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}
