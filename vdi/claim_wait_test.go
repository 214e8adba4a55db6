package vdi_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// stuckList is the store's Leases with a List that answers only when its
// caller stops waiting, as a Kubernetes API server that keeps refusing
// (client-go waits out each Retry-After and tries again) looks to a claim.
type stuckList struct{ *store.Leases }

func (s stuckList) List(ctx context.Context, _, _ string) ([]*vdi.Lease, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// slowStart is a backend whose members take a while to start, as a VM
// that boots does; a start whose context ends first fails.
type slowStart struct {
	*poolBackend
	takes time.Duration
}

func (b slowStart) Start(ctx context.Context, r vdi.Ref) error {
	select {
	case <-time.After(b.takes):
		return b.poolBackend.Start(ctx, r)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TestServiceClaim_ClaimWait: a claim's requests to the claim store are
// bounded (vdi.Config.ClaimWait) though its caller sets no deadline: a
// store that never answers ends the claim unavailable, not never. The
// member's start is not bounded by it: a start longer than ClaimWait
// still gives the desktop.
func TestServiceClaim_ClaimWait(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const wait = 100 * time.Millisecond

	stuck := vdi.NewService(vdi.Config{Backend: newPoolBackend(vdi.ModeEphemeral, "demo-1"), Leases: stuckList{db.Leases()}, Audit: db, ClaimWait: wait})
	done := make(chan error, 1)
	go func() {
		_, err := stuck.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "demo")
		done <- err
	}()
	select {
	case err := <-done:
		if vdi.ErrorCode(err) != vdi.EUnavailable {
			t.Errorf("claim on a store that never answers: %v; want it unavailable", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a claim on a store that never answers did not return in a minute; want it ended by its ClaimWait")
	}

	slow := vdi.NewService(vdi.Config{Backend: slowStart{newPoolBackend(vdi.ModeEphemeral, "demo-1"), 3 * wait}, Leases: db.Leases(), Audit: db, ClaimWait: wait})
	if d, err := slow.Claim(ctx, vdi.Identity{Login: "bob"}, "local", "demo"); err != nil || d.Power != vdi.PowerRunning {
		t.Errorf("claim of a member that starts in 3× ClaimWait: %s, %v; want it running", d.Power, err)
	}
}
