package vdi_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestMayPlayRecording: admins play any recording; a user only their own,
// and only while the desktop's pool records and has ownRecordings on.
func TestMayPlayRecording(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool := leasetest.NewPool("local", "exam", 1, 1)
	svc := vdi.NewService(vdi.Config{Backend: pool, Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler)})
	alice, mallory, ops := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "mallory"}, vdi.Identity{Login: "ops", Admin: true}
	ref, gone := vdi.Ref{Namespace: "local", Name: "exam-1"}, vdi.Ref{Namespace: "local", Name: "exam-9"}
	for _, tc := range []struct {
		name   string
		policy vdi.Policy
		who    vdi.Identity
		ref    vdi.Ref
		ok     bool
	}{
		{"the admin, rule off", vdi.Policy{Record: true}, ops, ref, true},
		{"the admin, desktop gone", vdi.Policy{}, ops, gone, true},
		{"the user, rule off", vdi.Policy{Record: true}, alice, ref, false},
		{"the user, rule on", vdi.Policy{Record: true, OwnRecordings: true}, alice, ref, true},
		{"the user, pool no longer recorded", vdi.Policy{OwnRecordings: true}, alice, ref, false},
		{"the user, desktop gone", vdi.Policy{Record: true, OwnRecordings: true}, alice, gone, false},
		{"another user, rule on", vdi.Policy{Record: true, OwnRecordings: true}, mallory, ref, false},
	} {
		pool.Policy = tc.policy
		err := svc.MayPlayRecording(ctx, tc.who, "alice", tc.ref)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v; want allowed %v", tc.name, err, tc.ok)
		}
		if err != nil && vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("%s: %v; want forbidden", tc.name, err)
		}
	}
}
