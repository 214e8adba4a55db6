package leasetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Bench measures claims through vdi.Service on the store: rounds in which
// claimants (distinct users, spread over portals instances) race for a fresh
// pool of members at once, until b.N claims were made. It reports the claim
// latency p50 and p99 in milliseconds, claims per second, and the members,
// claimants and portals per round. With more claimants than members the
// losers' clean conflicts count as claims too: they are answers a user waits
// for.
func Bench(b *testing.B, s Store, members, claimants, portals int) {
	ctx := context.Background()
	instances := make([]vdi.Leases, portals)
	for i := range instances {
		instances[i] = s.Open(b)
	}
	var lat []time.Duration
	var won int
	b.ResetTimer()
	start := time.Now()
	for round := 0; len(lat) < b.N; round++ {
		name := fmt.Sprintf("bench%d", round)
		pool := NewPool(s.Namespace, name, members, members)
		svcs := make([]*vdi.Service, portals)
		for i := range svcs {
			svcs[i] = service(pool, instances[i], nil)
		}
		n := min(claimants, b.N-len(lat))
		got := make([]time.Duration, n)
		ok := make([]bool, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				t := time.Now()
				_, err := svcs[i%portals].Claim(ctx, vdi.Identity{Login: fmt.Sprintf("user-%d", i)}, s.Namespace, name)
				got[i] = time.Since(t)
				if err == nil {
					ok[i] = true
				} else if vdi.ErrorCode(err) != vdi.EConflict {
					b.Errorf("claim: %v", err)
				}
			})
		}
		wg.Wait()
		lat = append(lat, got...)
		for _, w := range ok {
			if w {
				won++
			}
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	ms := func(p int) float64 {
		return float64(lat[min(len(lat)-1, len(lat)*p/100)]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(50), "p50-ms")
	b.ReportMetric(ms(99), "p99-ms")
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "claims/s")
	b.ReportMetric(float64(won)/float64(len(lat)), "won/claim")
	b.ReportMetric(float64(members), "members")
	b.ReportMetric(float64(claimants), "claimants")
	b.ReportMetric(float64(portals), "portals")
	b.ReportMetric(0, "ns/op") // the latency percentiles say it better
}
