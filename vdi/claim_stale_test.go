package vdi_test

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// staleList is the store's Leases with a List a moment behind it, as an
// informer cache on another replica is: it still shows the Leases of was
// as they were (since deleted, or changed).
type staleList struct {
	*store.Leases
	was []*vdi.Lease
}

func (s *staleList) List(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	l, err := s.Leases.List(ctx, namespace, pool)
	l = slices.DeleteFunc(l, func(l *vdi.Lease) bool {
		return slices.ContainsFunc(s.was, func(w *vdi.Lease) bool { return w.Member == l.Member })
	})
	return append(l, s.was...), err
}

// staleSetup opens a store for a stale-list test, closed when t ends, and
// the time its service reads.
func staleSetup(t *testing.T) (context.Context, time.Time, *store.DB) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return ctx, time.Unix(1_800_000_000, 0), db
}

// TestServiceClaim_StaleListOfOwnClaim: alice released demo-1 through
// another replica whose release this one's cache has not seen yet; her
// next claim here gets a desktop she holds, not the one she released
// (the soak's storm: her release of it then answered "not yours").
func TestServiceClaim_StaleListOfOwnClaim(t *testing.T) {
	ctx, now, db := staleSetup(t)
	leases := &staleList{Leases: db.Leases(), was: []*vdi.Lease{{Namespace: "local", Member: "demo-1", Pool: "demo",
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

// TestServiceClaim_StaleListOfOwnReleaseUnderWay: alice's release of
// demo-1 on another replica has marked its Lease and is making the
// member fresh; this replica's cache still shows her Lease unmarked. Her
// next claim here gets another desktop, not the one being reset (whose
// Lease the reset then deletes: her release of what the claim answered
// said "not yours", in the soak's storm).
func TestServiceClaim_StaleListOfOwnReleaseUnderWay(t *testing.T) {
	ctx, now, db := staleSetup(t)
	hers := vdi.Lease{Namespace: "local", Member: "demo-1", Pool: "demo", Holder: "alice", AcquireTime: now, RenewTime: now, Duration: time.Hour}
	marked := hers
	marked.Annotations = map[string]string{vdi.AnnotationReclaiming: vdi.MarkRelease}
	if _, err := db.Leases().Create(ctx, &marked); err != nil {
		t.Fatal(err)
	}
	leases := &staleList{Leases: db.Leases(), was: []*vdi.Lease{&hers}}
	b := newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2")
	svc := vdi.NewService(vdi.Config{Backend: b, Leases: leases, Audit: db, Now: func() time.Time { return now }})
	d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "demo-2" {
		t.Fatalf("alice's claim answered %s; want demo-2 (demo-1 is being reset after her release)", d.Name)
	}
	if l, err := db.Leases().Get(ctx, d.Ref()); err != nil || l.Holder != "alice" {
		t.Fatalf("alice's claim answered %s, whose Lease is %+v (%v); want one she holds", d.Name, l, err)
	}
}
