package kube_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimAwaitsTheWin: a claim on a replica whose Lease watch lags
// loses a member to another replica, which meanwhile took every member
// but one; the claim waits until its watch shows the winner's Lease (and
// with it every claim written before it: a watch reports writes in
// order), lists again and takes the one left. One race lost, where
// going on down its stale list would lose one for nearly every member it
// still showed free (vdi's awaitWin). "listed": the winner's Lease is in
// the list by the time the race is lost; "watched": it comes in while
// the claim waits.
func TestClaimAwaitsTheWin(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	gate := newWatchGate("/leases")
	defer gate.release()
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	mine, other := mustLeases(t, cfg), mustLeases(t, c.Config)
	const size = 30

	for _, when := range []string{"listed", "watched"} {
		t.Run(when, func(t *testing.T) {
			pool := leasetest.NewPool(ns, when, size, size)
			r := &racedLeases{Leases: mine, pool: when}
			gate.hold()
			r.race = func(want *vdi.Lease) {
				// The other replica takes every member but one, the one
				// this claim tries last.
				var names []string
				for i := 1; i <= size; i++ {
					if m := fmt.Sprintf("%s-%d", when, i); m != want.Member {
						names = append(names, m)
					}
				}
				r.keep = names[0]
				for i, m := range append(names[1:], want.Member) {
					now := time.Now()
					if _, err := other.Create(ctx, &vdi.Lease{Namespace: ns, Member: m, Pool: when, Holder: fmt.Sprintf("user-%d", i),
						AcquireTime: now, RenewTime: now, Duration: time.Hour}); err != nil {
						t.Errorf("the other replica's claim of %s: %v", m, err)
					}
				}
				if when == "listed" {
					gate.release()
					awaitListed(t, mine, ns, when, want.Member)
				}
			}
			if when == "watched" {
				r.lostThen = gate.release // once the claim's first look after its loss is taken
			}
			svc := newService(pool, r)
			d, err := svc.Claim(ctx, vdi.Identity{Login: "zed"}, ns, when)
			gate.release()
			if err != nil {
				t.Fatalf("claim: %v; want the one member left, %s", err, r.keep)
			}
			if d.Name != r.keep || r.lost.Load() != 1 {
				t.Errorf("the claim got %s after %d lost races; want %s after 1", d.Name, r.lost.Load(), r.keep)
			}
			if n := svc.Counters().RacesLost; n != uint64(r.lost.Load()) {
				t.Errorf("the portal counted %d lost races (corral_vdi_claim_races_lost_total); want the %d its store answered", n, r.lost.Load())
			}
		})
	}
}

// racedLeases is this replica's Leases, on which another replica's claims
// race the first claim of a member of pool (race, before the write).
type racedLeases struct {
	vdi.Leases
	pool     string
	race     func(want *vdi.Lease)
	lostThen func() // after the first look once a race was lost; nil: nothing
	keep     string // the member race left free

	once, looked sync.Once
	lost         atomic.Int32
}

func (r *racedLeases) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	if l.Pool == r.pool {
		r.once.Do(func() { r.race(l) })
	}
	out, err := r.Leases.Create(ctx, l)
	if errors.Is(err, vdi.ErrAlreadyExists) {
		r.lost.Add(1)
	}
	return out, err
}

func (r *racedLeases) List(ctx context.Context, namespace, pool string) ([]*vdi.Lease, error) {
	out, err := r.Leases.List(ctx, namespace, pool)
	if r.lost.Load() > 0 && r.lostThen != nil {
		r.looked.Do(r.lostThen)
	}
	return out, err
}

// OnChange keeps what the claim path looks for (vdi.ChangeNotifier).
func (r *racedLeases) OnChange(f func(vdi.Ref)) { r.Leases.(vdi.ChangeNotifier).OnChange(f) }

// awaitListed waits until leases lists member's claim in pool.
func awaitListed(t *testing.T, leases vdi.Leases, ns, pool, member string) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		ls, err := leases.List(context.Background(), ns, pool)
		if err == nil && slices.ContainsFunc(ls, func(l *vdi.Lease) bool { return l.Member == member }) {
			return
		}
	}
	t.Fatalf("%s's claim not listed 30 s after it was written", member)
}
