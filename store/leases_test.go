package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func newLease(member, holder string) *vdi.Lease {
	now := time.Unix(1_800_000_000, 0)
	return &vdi.Lease{Namespace: "local", Member: member, Pool: "demo", Holder: holder,
		AcquireTime: now, RenewTime: now, Duration: time.Hour,
		Annotations: map[string]string{"corral.dev/open-consoles": "0"}}
}

func testLeases(t *testing.T, open opener) {
	ctx := context.Background()
	ref := vdi.Ref{Namespace: "local", Name: "demo-1"}

	t.Run("CreateThenGet", func(t *testing.T) {
		leases := open(t).Leases()
		created, err := leases.Create(ctx, newLease("demo-1", "alice"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := leases.Get(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		if got.Holder != "alice" || got.ResourceVersion != created.ResourceVersion || !got.RenewTime.Equal(created.RenewTime) ||
			got.Duration != time.Hour || got.Annotations["corral.dev/open-consoles"] != "0" {
			t.Errorf("Get = %+v; want what Create stored: %+v", got, created)
		}
	})
	t.Run("ErrAlreadyExists", func(t *testing.T) {
		leases := open(t).Leases()
		leases.Create(ctx, newLease("demo-1", "alice"))
		if _, err := leases.Create(ctx, newLease("demo-1", "bob")); !errors.Is(err, vdi.ErrAlreadyExists) {
			t.Errorf("second Create: %v; want ErrAlreadyExists", err)
		}
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := open(t).Leases().Get(ctx, ref); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Get of nothing: %v; want ErrNotFound", err)
		}
	})
	t.Run("CreateFirst", func(t *testing.T) {
		leases := open(t).Leases()
		leases.Create(ctx, newLease("demo-1", "bob"))
		leases.Create(ctx, newLease("demo-3", "carol"))
		want := newLease("demo-2", "alice")
		want.Annotations["x"] = "y"
		got, err := leases.CreateFirst(ctx, []*vdi.Lease{newLease("demo-1", "alice"), want, newLease("demo-4", "alice")})
		if err != nil {
			t.Fatal(err)
		}
		if got.Member != "demo-2" || got.Holder != "alice" {
			t.Fatalf("CreateFirst = %s for %s; want demo-2 for alice, the first one free", got.Member, got.Holder)
		}
		stored, err := leases.Get(ctx, got.Ref())
		if err != nil {
			t.Fatal(err)
		}
		if stored.Holder != "alice" || stored.ResourceVersion != got.ResourceVersion || stored.Annotations["x"] != "y" ||
			!stored.AcquireTime.Equal(want.AcquireTime) || stored.Duration != time.Hour {
			t.Errorf("Get = %+v; want what CreateFirst answered: %+v", stored, got)
		}
		if _, err := leases.Get(ctx, vdi.Ref{Namespace: "local", Name: "demo-4"}); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Get of demo-4 after CreateFirst took demo-2: %v; want ErrNotFound (one Lease a turn)", err)
		}
		if _, err := leases.CreateFirst(ctx, []*vdi.Lease{newLease("demo-1", "dave"), newLease("demo-2", "dave")}); !errors.Is(err, vdi.ErrAlreadyExists) {
			t.Errorf("CreateFirst of taken members = %v; want ErrAlreadyExists", err)
		}
	})
	t.Run("UpdateWithStaleVersionConflicts", func(t *testing.T) {
		leases := open(t).Leases()
		first, _ := leases.Create(ctx, newLease("demo-1", "alice"))
		renewed := *first
		renewed.RenewTime = renewed.RenewTime.Add(time.Minute)
		second, err := leases.Update(ctx, &renewed)
		if err != nil {
			t.Fatal(err)
		}
		if second.ResourceVersion == first.ResourceVersion {
			t.Errorf("Update kept resource version %s; want a new one", first.ResourceVersion)
		}
		stale := *first
		stale.Holder = "bob"
		if _, err := leases.Update(ctx, &stale); !errors.Is(err, vdi.ErrConflict) {
			t.Errorf("Update with stale version: %v; want ErrConflict", err)
		}
		if err := leases.Delete(ctx, first); !errors.Is(err, vdi.ErrConflict) {
			t.Errorf("Delete with stale version: %v; want ErrConflict", err)
		}
	})
	t.Run("DeleteAndRecreateNeverRepeatsAVersion", func(t *testing.T) {
		leases := open(t).Leases()
		old, _ := leases.Create(ctx, newLease("demo-1", "alice"))
		if err := leases.Delete(ctx, old); err != nil {
			t.Fatal(err)
		}
		if err := leases.Delete(ctx, old); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("second Delete: %v; want ErrNotFound", err)
		}
		leases.Create(ctx, newLease("demo-1", "bob"))
		stale := *old
		if _, err := leases.Update(ctx, &stale); !errors.Is(err, vdi.ErrConflict) {
			t.Errorf("Update carrying the deleted lease's version: %v; want ErrConflict", err)
		}
	})
	t.Run("ConcurrentCreateHasOneWinner", func(t *testing.T) {
		leases := open(t).Leases()
		var wg sync.WaitGroup
		var mu sync.Mutex
		wins := 0
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := leases.Create(ctx, newLease("demo-1", string(rune('a'+i))))
				if err == nil {
					mu.Lock()
					wins++
					mu.Unlock()
				} else if !errors.Is(err, vdi.ErrAlreadyExists) {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if wins != 1 {
			t.Errorf("%d of 20 concurrent Creates won; want exactly 1", wins)
		}
	})
	t.Run("ListByPool", func(t *testing.T) {
		leases := open(t).Leases()
		leases.Create(ctx, newLease("demo-1", "alice"))
		other := newLease("lab-1", "bob")
		other.Pool = "lab"
		leases.Create(ctx, other)
		got, err := leases.List(ctx, "local", "demo")
		if err != nil || len(got) != 1 || got[0].Member != "demo-1" {
			t.Errorf("List(local, demo) = %v, %v; want demo-1 only", got, err)
		}
		if all, _ := leases.List(ctx, "", ""); len(all) != 2 {
			t.Errorf("List of everything has %d leases; want 2", len(all))
		}
	})
}

func TestLeaseExpired(t *testing.T) {
	l := newLease("demo-1", "alice")
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{0, false}, {59 * time.Minute, false}, {time.Hour, true}, {2 * time.Hour, true}} {
		if got := l.Expired(l.RenewTime.Add(tc.after)); got != tc.want {
			t.Errorf("Expired(renew+%v) = %v; want %v", tc.after, got, tc.want)
		}
	}
}
