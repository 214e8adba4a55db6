package leasetest_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

func TestMain(m *testing.M) {
	leasetest.MaybeChild(openStore)
	code := m.Run()
	testpg.Stop()
	os.Exit(code)
}

// openStore opens the database a child portal is told of: a postgres://
// URL, else a SQLite file.
func openStore(ctx context.Context, child string) (vdi.Leases, func(), error) {
	if strings.HasPrefix(child, "postgres://") {
		return openPostgres(ctx, child)
	}
	return openSQLite(ctx, child)
}

// openSQLite opens the database file at path, as a portal in local mode does.
func openSQLite(ctx context.Context, path string) (vdi.Leases, func(), error) {
	db, err := store.Open(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	return db.Leases(), func() { db.Close() }, nil
}

// sqliteStore is a fresh database file; every instance opens it anew, as
// separate portal processes sharing one data folder would.
func sqliteStore(t *testing.T) leasetest.Store {
	path := filepath.Join(t.TempDir(), "portal.db")
	return leasetest.Store{
		Namespace: "local",
		Child:     path,
		Open: func(tb testing.TB) vdi.Leases {
			leases, closeFn, err := openSQLite(context.Background(), path)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(closeFn)
			return leases
		},
	}
}

func TestSQLiteLeases(t *testing.T) { leasetest.Run(t, sqliteStore) }

// BenchmarkSQLiteClaim is the claim storm on one database file shared by
// three portal instances: 200 members claimed by 1, 100 and 200 claimants
// at once, p99 against the limit the single claimant sets in the same run.
func BenchmarkSQLiteClaim(b *testing.B) {
	leasetest.BenchStorm(b, func(tb testing.TB) leasetest.Store { return sqliteBench(tb) }, 200, 3)
}

// BenchmarkSQLiteMorning is the morning storm on one database file
// shared by three portal instances: 1,000 users arriving over 60 s, each
// claiming once (leasetest.BenchMorning).
func BenchmarkSQLiteMorning(b *testing.B) {
	leasetest.BenchMorning(b, sqliteBench(b), 1000, time.Minute, 3)
}

func sqliteBench(b testing.TB) leasetest.Store {
	path := filepath.Join(b.TempDir(), "portal.db")
	return leasetest.Store{Namespace: "local", Child: path, Open: func(tb testing.TB) vdi.Leases {
		leases, closeFn, err := openSQLite(context.Background(), path)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(closeFn)
		return leases
	}}
}
