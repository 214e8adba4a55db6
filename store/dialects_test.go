package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testpg.Stop()
	os.Exit(code)
}

// opener opens a fresh, empty database, closed when tb ends.
type opener func(tb testing.TB) *store.DB

// openSQLite opens a SQLite database in a temporary folder.
func openSQLite(tb testing.TB) *store.DB {
	tb.Helper()
	db, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "portal.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// openPostgres opens a fresh database on the test binary's real
// PostgreSQL server.
func openPostgres(tb testing.TB) *store.DB {
	tb.Helper()
	url := testpg.Shared(tb).NewDatabase(tb)
	db, err := store.OpenPostgres(context.Background(), url, "")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

// TestStore is the conformance suite: every test of the store runs on
// SQLite and on PostgreSQL.
func TestStore(t *testing.T) {
	for _, d := range []struct {
		name string
		open opener
	}{{"SQLite", openSQLite}, {"PostgreSQL", openPostgres}} {
		t.Run(d.name, func(t *testing.T) {
			t.Run("History", func(t *testing.T) { testHistory(t, d.open) })
			t.Run("Leases", func(t *testing.T) { testLeases(t, d.open) })
			t.Run("Prune", func(t *testing.T) { testPrune(t, d.open) })
			t.Run("PruneNobodyFlushesAnother", func(t *testing.T) { testPrune_NobodyFlushesAnother(t, d.open) })
			t.Run("Pools", func(t *testing.T) { testPools(t, d.open) })
			t.Run("Revocations", func(t *testing.T) { testRevocations(t, d.open) })
			t.Run("Recordings", func(t *testing.T) { testRecordings(t, d.open) })
			t.Run("PoolSamples", func(t *testing.T) { testPoolSamples(t, d.open) })
			t.Run("UserSettings", func(t *testing.T) { testUserSettings(t, d.open) })
		})
	}
}
