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

// Bench measures claims through vdi.Service on the store: rounds in which
// claimants (distinct users, spread over portals instances) race for a fresh
// pool of members at once, until at least b.N claims were made (whole
// rounds). It reports the claim latency p50 and p99 in milliseconds, claims
// per second, the store writes a claim asks for (claim locks included) and
// the races for a member it loses, and the members, claimants and portals
// per round, and returns
// the claims per second. With more claimants than members the losers' clean
// conflicts count as claims too: they are answers a user waits for.
//
// When single, the claims per second of one claimant at a time measured in
// the same run, is positive, it also reports the limit, claimants ÷ single
// (how long the round would take if the store did one claim after another
// at that rate), and p99 as a multiple of it.
func Bench(b *testing.B, s Store, members, claimants, portals int, single float64) float64 {
	ctx := context.Background()
	n := new(writeCount)
	instances, replicas := openPortals(b, s, portals, n)
	var start time.Time
	var lat []time.Duration
	var won int
	// Round -1 is not measured: it warms the portals up (connections
	// open, statements prepared, caches filled) as a portal that has been
	// running is.
	for round := -1; len(lat) < b.N; round++ {
		if round == 0 {
			lat, won = lat[:0], 0
			n.writes.Store(0)
			n.lost.Store(0)
			b.ResetTimer()
			start = time.Now()
		}
		name := fmt.Sprintf("bench%d", round)
		pool := NewPool(s.Namespace, name, members, members)
		svcs := make([]*vdi.Service, portals)
		for i := range svcs {
			svcs[i] = vdi.NewService(vdi.Config{Backend: pool, Leases: instances[i], Audit: nopAudit{},
				Log: slog.New(slog.DiscardHandler), Replicas: replicas[i]})
		}
		got := make([]time.Duration, claimants)
		ok := make([]bool, claimants)
		var wg sync.WaitGroup
		for i := range claimants {
			wg.Go(func() {
				// The latency is the answer's, which the HTTP handlers
				// send before the claim's lock is let go.
				t := time.Now()
				cctx, answered := vdi.WithAnswerFirst(ctx)
				_, err := svcs[i%portals].Claim(cctx, vdi.Identity{Login: fmt.Sprintf("user-%d", i)}, s.Namespace, name)
				got[i] = time.Since(t)
				answered()
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
	rate := float64(len(lat)) / elapsed.Seconds()
	b.ReportMetric(ms(50), "p50-ms")
	b.ReportMetric(ms(99), "p99-ms")
	b.ReportMetric(rate, "claims/s")
	b.ReportMetric(float64(won)/float64(len(lat)), "won/claim")
	b.ReportMetric(float64(n.writes.Load())/float64(len(lat)), "writes/claim")
	b.ReportMetric(float64(n.lost.Load())/float64(len(lat)), "lost/claim")
	b.ReportMetric(float64(members), "members")
	b.ReportMetric(float64(claimants), "claimants")
	b.ReportMetric(float64(portals), "portals")
	if single > 0 {
		limit := float64(claimants) / single * 1000
		b.ReportMetric(limit, "limit-ms")
		b.ReportMetric(ms(99)/limit, "p99/limit")
	}
	b.ReportMetric(0, "ns/op") // the latency percentiles say it better
	return rate
}

// BenchStorm is the claim storm on s: members members claimed by 1, 100
// and 200 claimants at once (as many as there are members at most) over
// portals instances, each round on a fresh pool. The single-claimant run
// comes first, so that the others report their p99 against the limit it
// sets (see Bench).
func BenchStorm(b *testing.B, open func(testing.TB) Store, members, portals int) {
	var single float64
	for _, n := range []int{1, 100, 200} {
		if n > members {
			continue
		}
		b.Run(fmt.Sprintf("members=%d/claimants=%d", members, n), func(b *testing.B) {
			if n == 1 {
				single = Bench(b, open(b), members, n, portals, 0)
				return
			}
			Bench(b, open(b), members, n, portals, single)
		})
	}
}

// openPortals opens s as portals portal instances, their writes counted
// by n, with their replicas (nil ones when s has none) each seeing all
// live.
func openPortals(b *testing.B, s Store, portals int, n *writeCount) ([]vdi.Leases, []vdi.Replicas) {
	instances := make([]vdi.Leases, portals)
	for i := range instances {
		instances[i] = count(s.Open(b), n)
	}
	replicas := make([]vdi.Replicas, portals)
	if s.Replicas != nil {
		for i := range replicas {
			replicas[i] = s.Replicas(b, fmt.Sprintf("portal-%d", i))
		}
		awaitLive(b, replicas)
	}
	return instances, replicas
}

// awaitLive waits until each of replicas sees them all live, as the
// replicas of a portal that has been running do.
func awaitLive(b *testing.B, replicas []vdi.Replicas) {
	deadline := time.Now().Add(30 * time.Second)
	for _, r := range replicas {
		for {
			self, live := r.Live()
			if len(live) == len(replicas) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("replica %s sees %v live after 30 s; want all %d", self, live, len(replicas))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
