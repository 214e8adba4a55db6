package vdi_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// batchesSeen is a Leases store that tries several new Leases in one
// turn (vdi.LeaseBatcher) and keeps the largest turn it was asked for.
type batchesSeen struct {
	vdi.Leases
	b       vdi.LeaseBatcher
	largest atomic.Int32
}

func (s *batchesSeen) CreateFirst(ctx context.Context, wants []*vdi.Lease) (*vdi.Lease, error) {
	if n := int32(len(wants)); n > s.largest.Load() {
		s.largest.Store(n)
	}
	return s.b.CreateFirst(ctx, wants)
}

// TestServiceClaim_TriesAFewNewMembersAtOnce: a claim on a pool of 200
// members that never had a Lease tries at most 16 of them in one turn
// of the store, where it sent every free one (a whole 1,000-member pool
// in the morning storm: the candidates sent and checked made a large
// pool's claim slower than a small one's).
func TestServiceClaim_TriesAFewNewMembersAtOnce(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := &batchesSeen{Leases: db.Leases(), b: db.Leases()}
	names := make([]string, 200)
	for i := range names {
		names[i] = fmt.Sprintf("demo-%d", i+1)
	}
	svc := vdi.NewService(vdi.Config{Backend: newPoolBackend(vdi.ModeEphemeral, names...), Leases: leases, Audit: db})
	if _, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "demo"); err != nil {
		t.Fatal(err)
	}
	if n := leases.largest.Load(); n == 0 || n > 16 {
		t.Errorf("the claim tried %d new members in one turn of the store; want 1 to 16", n)
	}
}
