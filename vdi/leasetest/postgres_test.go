package leasetest_test

import (
	"context"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// openPostgres opens the PostgreSQL database at url, as a local-mode
// portal with CORRAL_VDI_DATABASE_URL does.
func openPostgres(ctx context.Context, url string) (vdi.Leases, func(), error) {
	db, err := store.OpenPostgres(ctx, url, "")
	if err != nil {
		return nil, nil, err
	}
	return db.Leases(), func() { db.Close() }, nil
}

// postgresStore is a fresh database on the test binary's PostgreSQL; every
// instance connects anew, as portal processes sharing it would.
func postgresStore(tb testing.TB) leasetest.Store {
	url := testpg.Shared(tb).NewDatabase(tb)
	return leasetest.Store{
		Namespace: "local",
		Child:     url,
		Open: func(tb testing.TB) vdi.Leases {
			leases, closeFn, err := openPostgres(context.Background(), url)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(closeFn)
			return leases
		},
	}
}

// TestPostgresLeases runs the Lease conformance suite, with its races of
// several portal processes, on PostgreSQL.
func TestPostgresLeases(t *testing.T) {
	leasetest.Run(t, func(t *testing.T) leasetest.Store { return postgresStore(t) })
}

// BenchmarkPostgresClaim is the claim storm on one PostgreSQL database
// shared by three portal instances (own connections): 200 members claimed
// by 1, 100 and 200 claimants at once, p99 against the limit the single
// claimant sets in the same run.
func BenchmarkPostgresClaim(b *testing.B) {
	leasetest.BenchStorm(b, func(tb testing.TB) leasetest.Store { return postgresStore(tb) }, 200, 3)
}

// BenchmarkPostgresMorning is the morning storm on one PostgreSQL database
// shared by three portal instances: 1,000 users arriving over 60 s, each
// claiming once (leasetest.BenchMorning).
func BenchmarkPostgresMorning(b *testing.B) {
	leasetest.BenchMorning(b, postgresStore(b), 1000, time.Minute, 3)
}
