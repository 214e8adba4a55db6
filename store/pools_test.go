package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func testPools(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	p := store.LocalPool{Pool: vdi.Pool{Name: "lab", Kind: vdi.KindCT, Mode: vdi.ModeEphemeral, Source: "session",
		Policy: vdi.Policy{IdleTimeout: time.Hour}, Access: vdi.Access{Groups: []string{"finance"}}, Limits: vdi.Limits{DesktopsPerUser: 1}},
		Members: []string{"lab-1", "lab-2"}}
	if err := db.CreateLocalPool(ctx, p); err != nil {
		t.Fatal(err)
	}
	if err := db.CreateLocalPool(ctx, p); !errors.Is(err, vdi.ErrAlreadyExists) {
		t.Errorf("second CreateLocalPool: %v; want ErrAlreadyExists", err)
	}
	got, err := db.LocalPool(ctx, "lab")
	if err != nil || got.Size != 2 || got.Policy.IdleTimeout != time.Hour || strings.Join(got.Access.Groups, ",") != "finance" ||
		got.Limits.DesktopsPerUser != 1 || strings.Join(got.Members, ",") != "lab-1,lab-2" {
		t.Fatalf("LocalPool = %+v, %v; want what was stored", got, err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(db.AddLocalMembers(ctx, "lab", []string{"lab-3"}))
	must(db.RemoveLocalMembers(ctx, "lab", []string{"lab-1"}))
	must(db.SetLocalPoolPolicy(ctx, "lab", vdi.Policy{MaxSession: 8 * time.Hour}))
	must(db.SetLocalPoolAccess(ctx, "lab", vdi.Access{Users: []string{"bob"}}, vdi.Limits{}))
	got, _ = db.LocalPool(ctx, "lab")
	if got.Size != 2 || strings.Join(got.Members, ",") != "lab-2,lab-3" || got.Policy.MaxSession != 8*time.Hour ||
		strings.Join(got.Access.Users, ",") != "bob" || got.Limits.DesktopsPerUser != 0 {
		t.Errorf("after the changes LocalPool = %+v; want members lab-2,lab-3, max session 8h, access bob", got)
	}
	must(db.DeleteLocalPool(ctx, "lab"))
	if _, err := db.LocalPool(ctx, "lab"); !errors.Is(err, vdi.ErrNotFound) {
		t.Errorf("LocalPool after delete: %v; want ErrNotFound", err)
	}
	if err := db.SetLocalPoolPolicy(ctx, "lab", vdi.Policy{}); !errors.Is(err, vdi.ErrNotFound) {
		t.Errorf("SetLocalPoolPolicy of a deleted pool: %v; want ErrNotFound", err)
	}
}

func testRevocations(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	if got, err := db.SessionsRevokedBefore(ctx, "alice"); err != nil || !got.IsZero() {
		t.Fatalf("SessionsRevokedBefore of nobody revoked = %v, %v; want zero", got, err)
	}
	t1, t0 := time.Unix(1_800_000_100, 0), time.Unix(1_800_000_000, 0)
	for _, at := range []time.Time{t1, t0} { // an earlier one changes nothing
		if err := db.RevokeSessions(ctx, "alice", at); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := db.SessionsRevokedBefore(ctx, "alice"); err != nil || !got.Equal(t1) {
		t.Errorf("SessionsRevokedBefore = %v, %v; want the later %v", got, err, t1)
	}
}
