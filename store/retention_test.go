package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func testPrune(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	now := time.Unix(1_800_000_000, 0)
	db.Now = func() time.Time { return now }
	for i := range 10 { // one event and one session a day, oldest first
		now = time.Unix(1_800_000_000, 0).Add(time.Duration(i-9) * 24 * time.Hour)
		db.Record(ctx, vdi.AuditEvent{Actor: "alice", Action: fmt.Sprintf("claim-%d", i)})
		db.OpenSession(ctx, store.Session{ID: fmt.Sprint(i), Login: "alice", Namespace: "local", Member: "demo-1", Protocol: "vnc", Path: "direct"})
	}
	now = time.Unix(1_800_000_000, 0)

	t.Run("MaxAge", func(t *testing.T) {
		n, err := db.Prune(ctx, store.Retention{MaxAge: 7*24*time.Hour - time.Minute})
		if err != nil || n != 6 {
			t.Fatalf("Prune(7 days) removed %d, %v; want 3 audit rows + 3 sessions", n, err)
		}
	})
	t.Run("MaxRows", func(t *testing.T) {
		n, err := db.Prune(ctx, store.Retention{MaxRows: 4})
		if err != nil || n != 6 {
			t.Fatalf("Prune(4 rows) removed %d, %v; want 3 + 3", n, err)
		}
		log, _ := db.AuditLog(ctx, 100)
		if len(log) != 4 || log[0].Action != "claim-9" || log[3].Action != "claim-6" {
			t.Errorf("audit after pruning: %+v; want the newest 4 (claim-9 .. claim-6)", log)
		}
		sessions, _ := db.Sessions(ctx, 100)
		if len(sessions) != 4 || sessions[0].ID != "9" {
			t.Errorf("sessions after pruning: %d, newest %q; want 4, newest 9", len(sessions), sessions[0].ID)
		}
	})
}

// TestPrune_NobodyFlushesAnother: one user's volume never pushes out
// another's rows, and admin and security events go by age only.
func testPrune_NobodyFlushesAnother(t *testing.T, open opener) {
	ctx := context.Background()
	db := open(t)
	now := time.Unix(1_800_000_000, 0)
	db.Now = func() time.Time { now = now.Add(time.Second); return now }
	db.Record(ctx, vdi.AuditEvent{Actor: "admin", Action: "force-release", Target: "demo-1"})
	db.Record(ctx, vdi.AuditEvent{Actor: "admin", Action: "start", Target: "demo-1"})
	db.Record(ctx, vdi.AuditEvent{Actor: "bob", Action: "sign-in"})
	for range 50 {
		db.Record(ctx, vdi.AuditEvent{Actor: "mallory", Action: "claim", Target: "demo-2"})
	}
	if _, ok, _ := db.LastPrune(ctx); ok {
		t.Fatal("LastPrune before any pruning = true; want false")
	}
	n, err := db.Prune(ctx, store.Retention{MaxRows: 5})
	if err != nil || n != 45 {
		t.Fatalf("Prune(5 rows) removed %d, %v; want mallory's 45 oldest", n, err)
	}
	log, _ := db.AuditLog(ctx, 100)
	by := map[string]int{}
	for _, e := range log {
		by[e.Actor+" "+e.Action]++
	}
	if by["admin force-release"] != 1 || by["admin start"] != 1 || by["bob sign-in"] != 1 || by["mallory claim"] != 5 {
		t.Errorf("audit after pruning: %v; want admin's and bob's rows kept, mallory's newest 5", by)
	}
	p, ok, err := db.LastPrune(ctx)
	if err != nil || !ok || p.Audit != 45 || p.Session != 0 {
		t.Errorf("LastPrune = %+v, %v, %v; want 45 audit rows", p, ok, err)
	}
	now = now.Add(100 * 24 * time.Hour)
	if n, _ := db.Prune(ctx, store.Retention{MaxAge: 90 * 24 * time.Hour}); n != 8 {
		t.Errorf("Prune(90 days) 100 days later removed %d; want all 8 rows, protected ones too", n)
	}
}
