package store_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestBuffer_DatabaseThatStopsAnswering pauses the real PostgreSQL under
// a Buffer: writes return at once and wait in memory, in order, with the
// times they happened; when the server answers again every row is
// written. (What goes beyond the bound: TestBuffer_ShedsRoutineRowsFirst.)
func TestBuffer_DatabaseThatStopsAnswering(t *testing.T) {
	pg := testpg.Shared(t)
	db := openPostgres(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := store.NewBuffer(db, 6, slog.New(slog.DiscardHandler))
	go b.Run(ctx)

	if err := b.Record(ctx, vdi.AuditEvent{Actor: "alice", Action: "before"}); err != nil {
		t.Fatal(err)
	}
	pg.Pause(t, true)
	paused := true
	defer func() {
		if paused {
			pg.Pause(t, false)
		}
	}()
	start := time.Now()
	for i, action := range []string{"one", "two", "three", "four", "five"} {
		if err := b.Record(ctx, vdi.AuditEvent{Actor: "alice", Action: action}); err != nil {
			t.Fatalf("write %d while the database is paused: %v; want it kept", i, err)
		}
	}
	if err := b.OpenSession(ctx, store.Session{ID: "s1", Login: "alice", Namespace: "local", Member: "demo-1", Protocol: "vnc", Path: "direct"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("six writes to a paused database took %v; want them kept without waiting on each", d)
	}
	waiting, dropped, err := b.Status()
	if err == nil || waiting != 6 || dropped != 0 || b.StatusText() == "" {
		t.Errorf("Status while paused = %d waiting, %d dropped, %v; want 6, 0 and the error", waiting, dropped, err)
	}
	pg.Pause(t, false)
	paused = false
	deadline := time.Now().Add(30 * time.Second)
	for {
		if w, _, err := b.Status(); w == 0 && err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rows still waiting 30s after the database came back: %s", b.StatusText())
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, err := db.AuditLog(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for i := len(log) - 1; i >= 0; i-- {
		actions = append(actions, log[i].Action)
	}
	// "one" timed out while the server was stopped and may have landed
	// when it resumed; the retry must not write it twice.
	got := strings.Join(actions, ",")
	if got != "before,one,two,three,four,five" {
		t.Errorf("audit after the database came back = %s; want before,one,two,three,four,five: in order, once each", got)
	}
	if open, _ := db.OpenSessions(ctx); len(open) != 1 || open[0].OpenedAt.After(start.Add(5*time.Second)) {
		t.Errorf("open sessions = %+v; want s1, opened when it opened, not when it was written", open)
	}
}

// TestBuffer_FileDeleted: a SQLite file deleted under the portal goes on
// taking writes (into the unlinked file), and the status says so, with
// what to do; so does a file replaced by another.
func TestBuffer_FileDeleted(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "portal.db")
			db, err := store.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			b := store.NewBuffer(db, 10, slog.New(slog.DiscardHandler))
			if s := b.StatusText(); s != "" {
				t.Fatalf("status before: %q", s)
			}
			os.Remove(path)
			if how == "replaced" {
				os.WriteFile(path, nil, 0o600)
			}
			if s := b.StatusText(); !strings.Contains(s, "was "+how) || !strings.Contains(s, "restore the file from a backup") {
				t.Errorf("status after the file was %s: %q", how, s)
			}
		})
	}
}
