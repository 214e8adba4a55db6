package leasetest

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// BenchOneUser is one user racing herself on s: rounds of claims claims
// of hers at once (two tabs, a script) over portals instances, each round
// on a fresh pool, as the suite's OneUserRace/SamePool does. Her claims
// take turns at her claim lock, so the answers come one after another;
// it reports their p50 and p99 in milliseconds and the store writes a
// claim asks for (each try at her lock is one), and fails when a round's
// claims were answered with more than one desktop.
func BenchOneUser(b *testing.B, s Store, claims, portals int) {
	ctx := context.Background()
	n := new(writeCount)
	instances, replicas := openPortals(b, s, portals, n)
	var lat []time.Duration
	for round := -1; len(lat) < b.N; round++ { // round -1 warms up
		if round == 0 {
			lat = lat[:0]
			n.writes.Store(0)
			b.ResetTimer()
		}
		name := fmt.Sprintf("one%d", round)
		pool := NewPool(s.Namespace, name, 4, 4)
		got := make([]time.Duration, claims)
		names := make([]string, claims)
		svcs := make([]*vdi.Service, portals)
		for i := range svcs {
			svcs[i] = vdi.NewService(vdi.Config{Backend: pool, Leases: instances[i], Audit: nopAudit{},
				Log: slog.New(slog.DiscardHandler), Replicas: replicas[i]})
		}
		var wg sync.WaitGroup
		for i := range claims {
			svc := svcs[i%portals]
			wg.Go(func() {
				t := time.Now()
				cctx, answered := vdi.WithAnswerFirst(ctx)
				d, err := svc.Claim(cctx, vdi.Identity{Login: "alice"}, s.Namespace, name)
				got[i] = time.Since(t)
				answered()
				if err != nil {
					b.Errorf("claim %d of alice: %v", i, err)
				}
				names[i] = d.Name
			})
		}
		wg.Wait()
		if slices.Sort(names); len(slices.Compact(names)) != 1 {
			b.Errorf("round %d: alice's claims were answered with %v; want one desktop", round, slices.Compact(names))
		}
		lat = append(lat, got...)
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(p int) float64 {
		return float64(lat[min(len(lat)-1, len(lat)*p/100)]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(50), "p50-ms")
	b.ReportMetric(ms(99), "p99-ms")
	b.ReportMetric(float64(n.writes.Load())/float64(len(lat)), "writes/claim")
	b.ReportMetric(0, "ns/op")
}
