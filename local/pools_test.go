package local_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// mustPoolService returns a Service on a local backend with no pools.
func mustPoolService(t *testing.T) (*vdi.Service, *local.Backend, *store.DB) {
	t.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "cpool") // short: desktops' sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	db, err := store.Open(ctx, filepath.Join(dir, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	log := slog.New(slog.DiscardHandler)
	b, err := local.New(ctx, local.Config{DB: db, Dir: filepath.Join(dir, "local"), Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.StopAll(context.Background()) })
	return vdi.NewService(vdi.Config{Backend: b, Leases: db.Leases(), Audit: db, Log: log}), b, db
}

func memberNames(t *testing.T, b *local.Backend, pool string) []string {
	t.Helper()
	ms, err := b.Members(context.Background(), local.Namespace, pool)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}

func TestPoolAdmin(t *testing.T) {
	ctx := context.Background()
	ops, alice := vdi.Identity{Login: "ops", Admin: true}, vdi.Identity{Login: "alice"}
	svc, b, db := mustPoolService(t)

	t.Run("CreateValidates", func(t *testing.T) {
		for _, p := range []vdi.Pool{
			{Namespace: "local", Name: "Lab"},
			{Namespace: "local", Name: "<b>x</b>"},
			{Namespace: "local", Name: "lab", Size: -1},
			{Namespace: "local", Name: "lab", Mode: "forever"},
			{Namespace: "local", Name: "lab", Kind: vdi.KindVM},
			{Namespace: "kube", Name: "lab"},
		} {
			if err := svc.CreatePool(ctx, ops, p); vdi.ErrorCode(err) != vdi.EInvalid {
				t.Errorf("CreatePool(%+v) = %v; want EInvalid", p, err)
			}
		}
		if err := svc.CreatePool(ctx, alice, vdi.Pool{Namespace: "local", Name: "lab", Size: 1}); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("CreatePool by a user: %v; want EForbidden", err)
		}
	})

	t.Run("CreateResizeDelete", func(t *testing.T) {
		if err := svc.CreatePool(ctx, ops, vdi.Pool{Namespace: "local", Name: "lab", Size: 3, Mode: vdi.ModePersistent}); err != nil {
			t.Fatal(err)
		}
		if got, want := memberNames(t, b, "lab"), []string{"lab-1", "lab-2", "lab-3"}; !slices.Equal(got, want) {
			t.Fatalf("members %v; want %v", got, want)
		}
		if err := svc.CreatePool(ctx, ops, vdi.Pool{Namespace: "local", Name: "lab", Size: 1}); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("creating lab twice: %v; want EConflict", err)
		}
		// alice holds one; shrinking to 0 must refuse, to 1 must keep hers.
		_, err := svc.Assign(ctx, ops, vdi.Ref{Namespace: "local", Name: "lab-3"}, "alice")
		if err != nil && vdi.ErrorCode(err) != vdi.EUnavailable { // no Xvnc here is fine: the claim stays
			t.Fatal(err)
		}
		zero, one, four := 0, 1, 4
		if err := svc.UpdatePool(ctx, ops, "local", "lab", vdi.PoolUpdate{Size: &zero}); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("shrinking below the claimed count: %v; want EConflict", err)
		}
		if err := svc.UpdatePool(ctx, ops, "local", "lab", vdi.PoolUpdate{Size: &one}); err != nil {
			t.Fatal(err)
		}
		if got := memberNames(t, b, "lab"); !slices.Equal(got, []string{"lab-3"}) {
			t.Errorf("after shrinking to 1: %v; want alice's lab-3 kept", got)
		}
		if err := svc.UpdatePool(ctx, ops, "local", "lab", vdi.PoolUpdate{Size: &four}); err != nil {
			t.Fatal(err)
		}
		if got, want := memberNames(t, b, "lab"), []string{"lab-3", "lab-1", "lab-2", "lab-4"}; !slices.Equal(got, want) {
			t.Errorf("after growing to 4: %v; want %v", got, want)
		}
		policy := vdi.Policy{IdleTimeout: 10 * time.Minute}
		if err := svc.UpdatePool(ctx, ops, "local", "lab", vdi.PoolUpdate{Policy: &policy}); err != nil {
			t.Fatal(err)
		}
		if p, _ := b.Pool(ctx, "local", "lab"); p.Policy != policy || p.Size != 4 {
			t.Errorf("pool %+v; want size 4 and the new policy", p)
		}
		if err := svc.DeletePool(ctx, ops, "local", "lab"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("deleting a pool with a claim: %v; want EConflict", err)
		}
		if err := svc.Release(ctx, ops, vdi.Ref{Namespace: "local", Name: "lab-3"}, "test"); err != nil {
			t.Fatal(err)
		}
		if err := svc.DeletePool(ctx, ops, "local", "lab"); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Pool(ctx, "local", "lab"); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("pool after delete: %v; want ENotFound", err)
		}
		log, _ := db.AuditLog(ctx, 20)
		var actions []string
		for _, e := range log {
			actions = append(actions, e.Action)
		}
		for _, want := range []string{"pool-create", "pool-resize", "pool-policy", "pool-delete", "assign", "force-release"} {
			if !slices.Contains(actions, want) {
				t.Errorf("audit actions %v; want %s among them", actions, want)
			}
		}
	})
}
