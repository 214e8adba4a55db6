package store_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// waitWritten waits until nothing waits in b.
func waitWritten(t *testing.T, b *store.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if w, _, err := b.Status(); w == 0 && err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows still waiting 30s after the database came back: %s", b.StatusText())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestBuffer_ShedsRoutineRowsFirst pauses the real PostgreSQL under a
// Buffer of 10 rows and floods it with session rows and users' claims
// around a few admin and security rows: those are all written when it
// answers again. Once admin rows fill the buffer, AuditRoom refuses the
// next admin action.
func TestBuffer_ShedsRoutineRowsFirst(t *testing.T) {
	pg := testpg.Shared(t)
	db := openPostgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := store.NewBuffer(db, 10, slog.New(slog.DiscardHandler))
	go b.Run(ctx)
	pg.Pause(t, true)
	paused := true
	defer func() {
		if paused {
			pg.Pause(t, false)
		}
	}()
	admin := vdi.Protect(ctx)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(b.Record(admin, vdi.AuditEvent{Actor: "ops", Action: "assign", Target: "demo-1"}))
	must(b.Record(ctx, vdi.AuditEvent{Actor: "bob", Action: "sign-out"}))
	for i := range 300 {
		must(b.OpenSession(ctx, store.Session{ID: fmt.Sprintf("flood-%d", i), Login: "mallory", Namespace: "local", Member: "demo-2", Protocol: "vnc"}))
		must(b.Record(ctx, vdi.AuditEvent{Actor: "mallory", Action: "claim", Target: "demo-2"}))
	}
	must(b.Record(admin, vdi.AuditEvent{Actor: "ops", Action: "claim", Target: "demo-3"})) // an admin's request: kept too
	if err := b.AuditRoom(); err != nil {
		t.Errorf("AuditRoom with 3 of 10 rows admin rows: %v; want room", err)
	}
	for i := range 7 {
		must(b.Record(admin, vdi.AuditEvent{Actor: "ops", Action: "force-release", Target: fmt.Sprintf("demo-%d", 10+i)}))
	}
	if err := b.AuditRoom(); !errors.Is(err, store.ErrAuditFull) || vdi.ErrorCode(err) != vdi.EUnavailable {
		t.Errorf("AuditRoom with 10 of 10 admin rows = %v; want ErrAuditFull", err)
	}
	if _, dropped, _ := b.Status(); dropped < 600-3 {
		t.Errorf("dropped = %d; want the flood shed", dropped)
	}
	pg.Pause(t, false)
	paused = false
	waitWritten(t, b)
	log, err := db.AuditLog(ctx, 1000)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, e := range log {
		got[e.Actor+" "+e.Action]++
	}
	if got["ops assign"] != 1 || got["bob sign-out"] != 1 || got["ops claim"] != 1 || got["ops force-release"] != 7 {
		t.Errorf("audit after the outage = %v; want every admin and security row: ops assign, bob sign-out, ops claim, 7 force-releases", got)
	}
	if err := b.AuditRoom(); err != nil {
		t.Errorf("AuditRoom after the database came back: %v", err)
	}
}

// TestBuffer_SignOutDuringOutage: a sign-out while PostgreSQL does not
// answer says it is pending, and is written (the latest time) once the
// server answers, where another replica reads it.
func TestBuffer_SignOutDuringOutage(t *testing.T) {
	pg := testpg.Shared(t)
	url := pg.NewDatabase(t)
	db, err := store.OpenPostgres(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := store.OpenPostgres(context.Background(), url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := store.NewBuffer(db, 10, slog.New(slog.DiscardHandler))
	go b.Run(ctx)
	pg.Pause(t, true)
	paused := true
	defer func() {
		if paused {
			pg.Pause(t, false)
		}
	}()
	t1 := time.Unix(1_900_000_000, 0)
	if err := b.RevokeSessions(ctx, "dan", t1); !errors.Is(err, store.ErrSignOutPending) {
		t.Errorf("sign-out while the database is paused = %v; want ErrSignOutPending", err)
	}
	if err := b.RevokeSessions(ctx, "dan", t1.Add(time.Minute)); !errors.Is(err, store.ErrSignOutPending) {
		t.Errorf("second sign-out while paused = %v; want ErrSignOutPending", err)
	}
	if w, _, _ := b.Status(); w != 1 {
		t.Errorf("rows waiting = %d; want one sign-out row for dan", w)
	}
	pg.Pause(t, false)
	paused = false
	waitWritten(t, b)
	if got, err := other.SessionsRevokedBefore(ctx, "dan"); err != nil || !got.Equal(t1.Add(time.Minute)) {
		t.Errorf("the other replica reads dan's sign-out as %v, %v; want %v", got, err, t1.Add(time.Minute))
	}
	if err := b.RevokeSessions(ctx, "erin", t1); err != nil {
		t.Errorf("sign-out with the database up: %v", err)
	}
}
