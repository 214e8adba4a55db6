package vdi_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestValidName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"demo", true}, {"lab-2", true}, {"a", true}, {"9lives", true},
		{"", false}, {"Demo", false}, {"-lab", false}, {"lab-", false}, {"la_b", false},
		{"<script>", false}, {"a.b", false}, {strings.Repeat("a", 56), true}, {strings.Repeat("a", 57), false},
	} {
		if err := vdi.ValidName("pool", tc.name); (err == nil) != tc.ok {
			t.Errorf("ValidName(%q) = %v; want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestServiceAdmin(t *testing.T) {
	ctx := context.Background()
	alice, ops := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "ops", Admin: true}

	t.Run("DashboardShowsClaimsAndFacts", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		svc, _ := newServiceWithPolicy(t, newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"), &now, vdi.Policy{DisconnectGrace: 15 * time.Minute})
		if _, err := svc.Dashboard(ctx, alice); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Fatalf("Dashboard as a user: %v; want EForbidden", err)
		}
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		must(t, svc.ConsoleOpened(ctx, d.Ref()))
		must(t, svc.Input(ctx, d.Ref(), now))
		pools, err := svc.Dashboard(ctx, ops)
		if err != nil {
			t.Fatal(err)
		}
		p := pools[0]
		if p.Claimed != 1 || p.Free != 1 || p.Running != 1 || len(p.Members) != 2 || p.Effective.DisconnectGrace != 15*time.Minute {
			t.Fatalf("pool %+v; want 1 claimed, 1 free, 1 running, 2 members, 15m grace", p.PoolStatus)
		}
		for _, m := range p.Members {
			if m.Name == d.Name && (m.Holder != "alice" || m.Consoles != 1 || !m.LastInput.Equal(now)) {
				t.Errorf("claimed member %+v; want alice's with 1 console and input at %v", m, now)
			}
		}
	})

	t.Run("AssignFreeOnly", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		svc, db := newService(t, newPoolBackend(vdi.ModeEphemeral, "demo-1"), &now)
		ref := vdi.Ref{Namespace: "local", Name: "demo-1"}
		if _, err := svc.Assign(ctx, alice, ref, "bob"); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("Assign by a user: %v; want EForbidden", err)
		}
		if _, err := svc.Assign(ctx, ops, ref, " "); vdi.ErrorCode(err) != vdi.EInvalid {
			t.Errorf("Assign to nobody: %v; want EInvalid", err)
		}
		d, err := svc.Assign(ctx, ops, ref, "bob")
		if err != nil || d.Holder != "bob" || d.Power != vdi.PowerRunning {
			t.Fatalf("Assign = %+v, %v; want bob's, running", d, err)
		}
		if _, err := svc.Assign(ctx, ops, ref, "carol"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("Assign a held desktop: %v; want EConflict", err)
		}
		if err := svc.Recreate(ctx, ops, ref); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("Recreate a held desktop: %v; want EConflict", err)
		}
		log, _ := db.AuditLog(ctx, 1)
		if len(log) != 1 || log[0].Action != "assign" || log[0].Actor != "ops" || log[0].Detail != "to bob" {
			t.Errorf("audit %+v; want ops assigning to bob", log)
		}
	})

	t.Run("PoolAdminNeedsABackendThatHasIt", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		svc, _ := newService(t, newPoolBackend(vdi.ModeEphemeral, "demo-1"), &now)
		err := svc.CreatePool(ctx, ops, vdi.Pool{Namespace: "local", Name: "lab", Size: 1})
		if e, ok := err.(*vdi.Error); !ok || e.Code != vdi.EInvalid || e.Hint == "" {
			t.Errorf("CreatePool on a backend without PoolAdmin: %v; want EInvalid with a hint", err)
		}
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
