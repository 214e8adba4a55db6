package store_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/store"
)

// oldNames are the steps as databases recorded them before the
// migrations were renumbered to unique prefixes.
var oldNames = []string{
	"migrations/0001_init.sql",
	"migrations/0002_session_input.sql",
	"migrations/0003_local_members_pool.sql",
	"migrations/0004_pool_access.sql",
	"migrations/0004_trust_boundaries.sql",
	"migrations/0005_audit_key.sql",
	"migrations/0006_pool_standby.sql",
	"migrations/0006_recordings.sql",
	"migrations/0007_lease_versions.sql",
}

// newSteps are the steps added after the renumbering, recorded by their
// own names.
var newSteps = []string{"migrations/0011_standby_demand.sql", "migrations/0012_tokens.sql", "migrations/0013_token_scopes.sql", "migrations/0014_pool_samples.sql", "migrations/0015_leases_holder.sql", "migrations/0016_user_settings.sql"}

// TestMigrations_UniquePrefixes checks that no two migrations of a dialect
// share a number, so their order is plain from their names.
func TestMigrations_UniquePrefixes(t *testing.T) {
	for _, dir := range []string{"migrations", "migrations/postgres"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.sql"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: %d files, %v", dir, len(files), err)
		}
		seen := map[string]string{}
		for _, f := range files {
			prefix, _, _ := strings.Cut(filepath.Base(f), "_")
			if other, ok := seen[prefix]; ok {
				t.Errorf("%s: %s and %s share the prefix %s; give the newer the next free number (and record its old name in recordedAs if it was ever applied)", dir, other, filepath.Base(f), prefix)
			}
			seen[prefix] = filepath.Base(f)
		}
	}
}

// recorded returns the steps the SQLite database at file has recorded.
func recorded(t *testing.T, file string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", file)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM migrations ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	return names
}

// TestOpen_MigratedByOldNames opens a database that a portal from before
// the renumbering migrated (testdata, made by that portal's store.Open):
// no step runs again, its rows are there, and the steps keep their
// recorded names, so the older portal can still open it too.
func TestOpen_MigratedByOldNames(t *testing.T) {
	ctx := context.Background()
	buf, err := os.ReadFile("testdata/migrated-by-old-names.db")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "portal.db")
	if err := os.WriteFile(file, buf, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := store.Open(ctx, file)
	if err != nil {
		t.Fatalf("open a database migrated by the old names: %v", err)
	}
	sessions, err := db.Sessions(ctx, 10)
	if err != nil || len(sessions) != 1 || sessions[0].ID != "s-old" {
		t.Errorf("sessions = %+v, %v; want the one session s-old", sessions, err)
	}
	audit, err := db.AuditLog(ctx, 10)
	if err != nil || len(audit) != 1 || audit[0].Action != "pool-resize" {
		t.Errorf("audit = %+v, %v; want the one pool-resize", audit, err)
	}
	db.Close()
	want := append(slices.Clone(oldNames), newSteps...)
	if got := recorded(t, file); !slices.Equal(got, want) {
		t.Errorf("recorded steps = %q; want %q", got, want)
	}

	fresh := filepath.Join(t.TempDir(), "fresh.db")
	db, err = store.Open(ctx, fresh)
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if got := recorded(t, fresh); !slices.Equal(got, want) {
		t.Errorf("a new database records %q; want the names older portals know, then the new steps, %q", got, want)
	}
}
