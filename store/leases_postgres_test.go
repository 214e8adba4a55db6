package store_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestPostgres_CreateFirstTakenWhileWaiting: a claim whose CreateFirst
// waits for lease_seq while another portal's write takes its first
// choice gets its next choice, not "all taken" (its statement's snapshot
// is older than that write).
func TestPostgres_CreateFirstTakenWhileWaiting(t *testing.T) {
	ctx := context.Background()
	url := testpg.Shared(t).NewDatabase(t)
	db, err := store.OpenPostgres(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	other, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	// Another portal's claim of demo-1, holding lease_seq until it commits.
	tx, err := other.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var rv int64
	if err := tx.QueryRowContext(ctx, `UPDATE lease_seq SET n = n + 1 RETURNING n`).Scan(&rv); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO leases (namespace, member, pool, holder, acquire_time, renew_time, duration_seconds, resource_version)
		VALUES ('local', 'demo-1', 'demo', 'bob', 1, 1, 3600, $1)`, rv); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		l   *vdi.Lease
		err error
	}
	done := make(chan answer, 1)
	go func() {
		l, err := db.Leases().CreateFirst(ctx, []*vdi.Lease{newLease("demo-1", "alice"), newLease("demo-2", "alice")})
		done <- answer{l, err}
	}()
	// Commit only once alice's statement waits for lease_seq.
	for waiting := 0; waiting == 0; time.Sleep(5 * time.Millisecond) {
		select {
		case got := <-done:
			t.Fatalf("CreateFirst = %v, %v without waiting for the other portal's lease_seq", got.l, got.err)
		default:
		}
		if err := other.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'WITH free AS%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatalf("CreateFirst(demo-1, demo-2) with demo-1 taken while it waited: %v; want demo-2", got.err)
	}
	if got.l.Member != "demo-2" || got.l.Holder != "alice" {
		t.Errorf("CreateFirst = %s for %s; want demo-2 for alice", got.l.Member, got.l.Holder)
	}
	if l, err := db.Leases().Get(ctx, vdi.Ref{Namespace: "local", Name: "demo-1"}); err != nil || l.Holder != "bob" {
		t.Errorf("demo-1 = %+v, %v; want bob's still", l, err)
	}
}
