package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestPrune(t *testing.T) {
	ctx := context.Background()
	db := MustOpenDB(t)
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
