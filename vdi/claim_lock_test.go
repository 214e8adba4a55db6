package vdi_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// lockLeases is the store's Leases seen through vdi.Leases alone, so that
// claims take a lock Lease (as on Kubernetes) rather than the store's own
// lock; its List answers only when its caller stops waiting, as an API
// server that keeps refusing looks to a claim, and notes when that was.
type lockLeases struct {
	vdi.Leases
	mu     sync.Mutex
	gaveUp time.Time
}

func (s *lockLeases) List(ctx context.Context, _, _ string) ([]*vdi.Lease, error) {
	<-ctx.Done()
	s.mu.Lock()
	s.gaveUp = time.Now()
	s.mu.Unlock()
	return nil, ctx.Err()
}

// TestServiceClaim_EndsBeforeItsLock: a claim slowed past its user's claim
// lock would read and write beside her next claim, which takes the lock
// over once it has run out (on any replica): one desktop per pool and the
// quotas would no longer hold. So a claim's store requests end before its
// lock runs out, though its ClaimWait is longer, and the user is told the
// claim store did not answer.
func TestServiceClaim_EndsBeforeItsLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := &lockLeases{Leases: db.Leases()}
	svc := vdi.NewService(vdi.Config{Backend: newPoolBackend(vdi.ModeEphemeral, "demo-1"), Leases: leases, Audit: db, ClaimWait: time.Minute})
	started := time.Now()
	_, err = svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "demo")
	if vdi.ErrorCode(err) != vdi.EUnavailable {
		t.Fatalf("claim on a store that does not answer: %v; want it unavailable", err)
	}
	locks, err := db.Leases().List(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locks {
		t.Errorf("Lease %s left after the claim; want its lock let go", l.Ref())
	}
	leases.mu.Lock()
	gaveUp := leases.gaveUp
	leases.mu.Unlock()
	// The lock was written after started and runs out 15 s after it.
	if runsOut := started.Add(15 * time.Second); !gaveUp.Before(runsOut) {
		t.Errorf("the claim read the store until %v after it began; want it ended before its claim lock ran out (15 s)", gaveUp.Sub(started))
	}
}
