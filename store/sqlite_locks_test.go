package store_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// mustOpenTwice opens one SQLite file as two portals would.
func mustOpenTwice(tb testing.TB) (*store.DB, *store.DB) {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "portal.db")
	var dbs [2]*store.DB
	for i := range dbs {
		db, err := store.Open(context.Background(), path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		dbs[i] = db
	}
	return dbs[0], dbs[1]
}

func TestLeases_LockClaims(t *testing.T) {
	ctx := context.Background()
	a, b := mustOpenTwice(t)
	unlock, ok, err := a.Leases().LockClaims(ctx, "local/alice")
	if err != nil || !ok {
		t.Fatalf("LockClaims = %v, %v; want a lock", ok, err)
	}
	t.Run("HeldExcludes", func(t *testing.T) {
		short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if _, _, err := b.Leases().LockClaims(short, "local/alice"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("LockClaims of a held lock = %v; want it to wait until the deadline", err)
		}
	})
	t.Run("OthersFree", func(t *testing.T) {
		other, ok, err := b.Leases().LockClaims(ctx, "local/bob")
		if err != nil || !ok {
			t.Fatalf("LockClaims(bob) = %v, %v; want a lock", ok, err)
		}
		other()
	})
	t.Run("LetGo", func(t *testing.T) {
		got := make(chan error, 1)
		go func() {
			again, _, err := b.Leases().LockClaims(ctx, "local/alice")
			if err == nil {
				again()
			}
			got <- err
		}()
		time.Sleep(20 * time.Millisecond)
		unlock()
		unlock() // twice is harmless
		select {
		case err := <-got:
			if err != nil {
				t.Errorf("LockClaims after unlock = %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("LockClaims still waits after unlock")
		}
	})
}

// TestLeases_ListCache checks that a portal's cached List sees every
// change another portal makes: creates, updates, deletes, moves.
func TestLeases_ListCache(t *testing.T) {
	ctx := context.Background()
	a, b := mustOpenTwice(t)
	reader, writer := a.Leases(), b.Leases()
	members := func() []string {
		t.Helper()
		ls, err := reader.List(ctx, "local", "demo")
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, l := range ls {
			out = append(out, l.Member+"="+l.Holder)
		}
		return out
	}
	check := func(step string, want ...string) {
		t.Helper()
		if got := members(); !slices.Equal(got, want) {
			t.Errorf("after %s: List = %v; want %v", step, got, want)
		}
	}
	check("nothing")
	var leases []*vdi.Lease
	for i := range 3 {
		l, err := writer.Create(ctx, newLease(fmt.Sprintf("demo-%d", i), "alice"))
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	check("creates", "demo-0=alice", "demo-1=alice", "demo-2=alice")
	up := *leases[1]
	up.Holder = "bob"
	if _, err := writer.Update(ctx, &up); err != nil {
		t.Fatal(err)
	}
	check("an update", "demo-0=alice", "demo-1=bob", "demo-2=alice")
	if err := writer.Delete(ctx, leases[0]); err != nil {
		t.Fatal(err)
	}
	check("a delete", "demo-1=bob", "demo-2=alice")
	moved := *leases[2]
	moved.Pool = "other"
	if _, err := writer.Update(ctx, &moved); err != nil {
		t.Fatal(err)
	}
	check("a move to another pool", "demo-1=bob")
	// What List returns is the caller's to change.
	ls, _ := reader.List(ctx, "local", "demo")
	ls[0].Holder, ls[0].Annotations["x"] = "mallory", "y"
	check("changing a returned Lease", "demo-1=bob")
	if again, _ := reader.List(ctx, "local", "demo"); again[0].Annotations["x"] != "" {
		t.Error("a returned Lease's annotations are shared with the cache")
	}
}

func TestLeases_CreateFirst(t *testing.T) {
	ctx := context.Background()
	a, b := mustOpenTwice(t)
	if _, err := b.Leases().Create(ctx, newLease("demo-1", "bob")); err != nil {
		t.Fatal(err)
	}
	a.Leases().List(ctx, "local", "demo") // a cache that knows demo-1
	if _, err := b.Leases().Create(ctx, newLease("demo-2", "carol")); err != nil {
		t.Fatal(err)
	}
	got, err := a.Leases().CreateFirst(ctx, []*vdi.Lease{newLease("demo-1", "alice"), newLease("demo-2", "alice"), newLease("demo-3", "alice")})
	if err != nil {
		t.Fatal(err)
	}
	if got.Member != "demo-3" || got.Holder != "alice" {
		t.Errorf("CreateFirst = %s for %s; want demo-3 for alice, the first one free", got.Member, got.Holder)
	}
	if _, err := a.Leases().CreateFirst(ctx, []*vdi.Lease{newLease("demo-1", "dave"), newLease("demo-3", "dave")}); !errors.Is(err, vdi.ErrAlreadyExists) {
		t.Errorf("CreateFirst of taken members = %v; want ErrAlreadyExists", err)
	}
}
