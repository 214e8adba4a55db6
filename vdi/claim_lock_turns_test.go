package vdi_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// lockTriesCounted is a Leases store with claim-lock Leases (no
// vdi.ClaimLocks of its own) that counts the tries at a claim lock: its
// creates, and those refused because another claim held it.
type lockTriesCounted struct {
	vdi.Leases
	tries, refused atomic.Int32
}

func (s *lockTriesCounted) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	out, err := s.Leases.Create(ctx, l)
	if l.Pool == "claim.lock" {
		s.tries.Add(1)
		if errors.Is(err, vdi.ErrAlreadyExists) {
			s.refused.Add(1)
		}
	}
	return out, err
}

// TestServiceClaim_TakesTurnsAtTheLock: a user's claims racing on one
// portal take turns at her claim lock in the portal, so each tries the
// lock Lease once, when the claim before it has let it go, where they
// polled it (a create and a get each time, every 100 ms at most) while
// another held it; every one is answered with the one desktop.
func TestServiceClaim_TakesTurnsAtTheLock(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := &lockTriesCounted{Leases: db.Leases()}
	svc := vdi.NewService(vdi.Config{Backend: newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"), Leases: leases, Audit: db})
	const claims = 20
	names := make([]string, claims)
	var wg sync.WaitGroup
	for i := range claims {
		wg.Go(func() {
			d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "demo")
			if err != nil {
				t.Errorf("claim %d of alice: %v", i, err)
			}
			names[i] = d.Name
		})
	}
	wg.Wait()
	if slices.Sort(names); len(slices.Compact(names)) != 1 {
		t.Errorf("alice's claims were answered with %v; want one desktop", slices.Compact(names))
	}
	if n, r := leases.tries.Load(), leases.refused.Load(); n != claims || r != 0 {
		t.Errorf("alice's %d claims tried her claim lock %d times, %d of them refused while another held it; want each once, when it was free", claims, n, r)
	}
}
