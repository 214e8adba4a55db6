package vdi_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// staleList is the store's Leases with a List a moment behind it, as an
// informer cache on another replica is: it still shows Leases since
// deleted.
type staleList struct {
	*store.Leases
	gone []*vdi.Lease
}

func (s *staleList) List(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	l, err := s.Leases.List(ctx, namespace, pool)
	return append(l, s.gone...), err
}

// TestServiceClaim_StaleListOfOwnClaim: alice released demo-1 through
// another replica whose release this one's cache has not seen yet; her
// next claim here gets a desktop she holds, not the one she released
// (the soak's storm: her release of it then answered "not yours").
func TestServiceClaim_StaleListOfOwnClaim(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := &staleList{Leases: db.Leases(), gone: []*vdi.Lease{{Namespace: "local", Member: "demo-1", Pool: "demo",
		Holder: "alice", AcquireTime: now, RenewTime: now, Duration: time.Hour}}}
	b := newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2")
	svc := vdi.NewService(vdi.Config{Backend: b, Leases: leases, Audit: db, Now: func() time.Time { return now }})
	d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "demo")
	if err != nil {
		t.Fatal(err)
	}
	l, err := db.Leases().Get(ctx, d.Ref())
	if err != nil || l.Holder != "alice" {
		t.Fatalf("alice's claim answered %s, whose Lease is %+v (%v); want one she holds", d.Name, l, err)
	}
	if err := svc.Release(ctx, vdi.Identity{Login: "alice"}, d.Ref(), ""); err != nil {
		t.Errorf("alice releases what her claim answered: %v", err)
	}
}
