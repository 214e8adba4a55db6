package vdi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// slowRecreate is an ephemeral pool whose Recreate takes until release
// closes or its context ends. A second Recreate while one works fails at
// once: the member would be reset twice.
type slowRecreate struct {
	*poolBackend
	started chan string
	release chan struct{}
	done    atomic.Int32
	working atomic.Int32
}

func (b *slowRecreate) Recreate(ctx context.Context, r vdi.Ref) error {
	if b.working.Add(1) > 1 {
		b.working.Add(-1)
		return fmt.Errorf("a second recreate of %s while the first works", r.Name)
	}
	defer b.working.Add(-1)
	b.started <- r.Name
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-b.release:
	}
	b.done.Add(1)
	return nil
}

// TestReclaim_MarkRenewedWhileAtWork: a release whose recreate takes long
// (a re-clone on slow storage) renews its mark on the Lease, so another
// replica's reclaim loop never takes it for one a crash cut short and
// recreates the member a second time at once; once the replica at work is
// gone (no more renewals), the other finishes it within reclaimStale. The
// replicas' clocks play no part: the one at work runs minutes behind the
// other's, or minutes ahead.
func TestReclaim_MarkRenewedWhileAtWork(t *testing.T) {
	for _, tc := range []struct {
		name string
		skew time.Duration // of the replica at work's clock from the other's
	}{
		{"AtWorkBehind", -3 * time.Minute},
		{"AtWorkAhead", 3 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) { testMarkRenewedWhileAtWork(t, tc.skew) })
	}
}

func testMarkRenewedWhileAtWork(t *testing.T, skew time.Duration) {
	ctx := context.Background()
	var clock atomic.Int64
	clock.Store(1_800_000_000)
	now := func(skew time.Duration) func() time.Time {
		return func() time.Time { return time.Unix(clock.Load(), 0).Add(skew) }
	}
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &slowRecreate{poolBackend: newPoolBackend(vdi.ModeEphemeral, "demo-1"), started: make(chan string, 4), release: make(chan struct{})}
	replica := func(skew time.Duration) *vdi.Service {
		return vdi.NewService(vdi.Config{Backend: b, Leases: db.Leases(), Audit: db, Now: now(skew)})
	}
	a, other := replica(skew), replica(0)
	alice := vdi.Identity{Login: "alice"}
	d, err := a.Claim(ctx, alice, "local", "demo")
	if err != nil {
		t.Fatal(err)
	}
	actx, kill := context.WithCancel(ctx)
	released := make(chan error, 1)
	go func() { released <- a.Release(actx, alice, d.Ref(), "") }()
	<-b.started
	mustReclaim(t, other, 0) // the other sees the mark

	// Far past the old fixed window of 10 min: only renewals keep it.
	clock.Add(int64((11 * time.Minute).Seconds()))
	marked, err := db.Leases().Get(ctx, d.Ref())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := db.Leases().Get(ctx, d.Ref())
		if err == nil && l.ResourceVersion != marked.ResourceVersion {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mark at work was not renewed: %+v, %v", l, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	mustReclaim(t, other, 0)
	select {
	case m := <-b.started:
		t.Fatalf("the other replica recreated %s while the first still works on it", m)
	default:
	}

	kill() // the replica at work is gone: its renewals stop
	if err := <-released; err == nil {
		t.Fatal("a release cut short answered nil; want an error (the desktop is not reset yet)")
	}
	mustReclaim(t, other, 0) // seen again, unchanged
	clock.Add(int64((31 * time.Second).Seconds()))
	close(b.release)
	mustReclaim(t, other, 1)
	if n := b.done.Load(); n != 1 {
		t.Errorf("recreates finished: %d; want the other replica's one", n)
	}
	if _, err := db.Leases().Get(ctx, d.Ref()); err == nil {
		t.Error("the claim is still there after the other replica finished the release")
	}
}
