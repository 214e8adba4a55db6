package leasetest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// BenchMorning is the morning storm's shape (the soak's, docs/reliability.md)
// on s, in process: users users arrive at random moments over over, each
// claiming once through one of portals instances from a pool of as many
// running members. A lone claimant's 20 claims one after another, on a
// pool of their own of the storm pool's size (a claim lists and ranks its
// pool, so a smaller one would flatter the limit), set the serial limit
// first. It reports the answers'
// p50 and p99 in milliseconds (as the HTTP handlers answer: before the
// claim lock is let go), the serial limit (the lone claims' p50) and the
// storm's p99 as a multiple of it, the slowest lone claim (a tail the
// machine alone gives), the store writes a claim asks for and
// the races it loses; it fails when a user got no desktop or holds two.
// It runs once, whatever b.N.
func BenchMorning(b *testing.B, s Store, users int, over time.Duration, portals int) {
	ctx := context.Background()
	n := new(writeCount)
	instances, replicas := openPortals(b, s, portals, n)
	services := func(pool *Pool) []*vdi.Service {
		svcs := make([]*vdi.Service, portals)
		for i := range svcs {
			svcs[i] = vdi.NewService(vdi.Config{Backend: pool, Leases: instances[i], Audit: nopAudit{},
				Log: slog.New(slog.DiscardHandler), Replicas: replicas[i]})
		}
		return svcs
	}
	claim := func(svc *vdi.Service, user, pool string) (time.Duration, error) {
		t := time.Now()
		cctx, answered := vdi.WithAnswerFirst(ctx)
		defer answered()
		_, err := svc.Claim(cctx, vdi.Identity{Login: user}, s.Namespace, pool)
		return time.Since(t), err
	}

	const serialClaims = 20
	serial := services(NewPool(s.Namespace, "serial", users, users))
	var lone []time.Duration
	for i := range serialClaims {
		d, err := claim(serial[i%portals], fmt.Sprintf("lone-%d", i), "serial")
		if err != nil {
			b.Fatalf("lone claim %d: %v", i, err)
		}
		lone = append(lone, d)
	}

	b.ResetTimer()
	n.writes.Store(0)
	n.lost.Store(0)
	svcs := services(NewPool(s.Namespace, "morning", users, users))
	rng := rand.New(rand.NewPCG(35, 1000))
	lat := make([]time.Duration, users)
	failed := make([]error, users)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range users {
		at, svc := time.Duration(rng.Int64N(int64(over))), svcs[rng.IntN(portals)]
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(at)))
			lat[i], failed[i] = claim(svc, fmt.Sprintf("user-%d", i), "morning")
		})
	}
	wg.Wait()
	b.StopTimer()
	for i, err := range failed {
		if err != nil {
			b.Errorf("claim of user-%d: %v; want a desktop", i, err)
		}
	}
	held, err := instances[0].List(ctx, s.Namespace, "morning")
	if err != nil {
		b.Fatal(err)
	}
	mine := map[string]int{}
	for _, l := range held {
		mine[l.Holder]++
	}
	for u, k := range mine {
		if k > 1 {
			b.Errorf("%s holds %d desktops of the pool; want 1", u, k)
		}
	}

	pct := func(d []time.Duration, p int) float64 {
		d = slices.Sorted(slices.Values(d))
		return float64(d[min(len(d)-1, len(d)*p/100)]) / float64(time.Millisecond)
	}
	limit := pct(lone, 50)
	b.ReportMetric(pct(lat, 50), "p50-ms")
	b.ReportMetric(pct(lat, 99), "p99-ms")
	b.ReportMetric(limit, "limit-ms")
	b.ReportMetric(pct(lone, 99), "lone-max-ms") // 20 claims: the slowest
	b.ReportMetric(pct(lat, 99)/limit, "p99/limit")
	b.ReportMetric(float64(users)/over.Seconds(), "arrivals/s")
	b.ReportMetric(float64(n.writes.Load())/float64(users), "writes/claim")
	b.ReportMetric(float64(n.lost.Load())/float64(users), "lost/claim")
	b.ReportMetric(float64(len(held)), "held")
	b.ReportMetric(0, "ns/op") // the latency percentiles say it better
}
