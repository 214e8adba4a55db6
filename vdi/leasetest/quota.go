package leasetest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// One user's racing claims, spread over racePortals processes: the
// one-desktop-per-pool rule and the per-user quota hold across them.
const (
	userClaims   = 50
	quotaPools   = 5
	quotaMax     = 2
	quotaPerPool = 4
)

// spawnUser starts racePortals child portals claiming for one user,
// userClaims claims in all, and lets them go at once.
func spawnUser(t *testing.T, s Store, j job) []*proc {
	t.Helper()
	procs := make([]*proc, racePortals)
	for i := range procs {
		pj := j
		pj.Users = nil
		for c := i; c < userClaims; c += racePortals {
			pj.Users = append(pj.Users, "alice")
		}
		procs[i] = spawn(t, s, pj)
	}
	waitReady(t, procs)
	for i, p := range procs {
		if _, err := p.stdin.Write([]byte("go\n")); err != nil {
			t.Fatalf("child portal %d: %v", i, err)
		}
	}
	return procs
}

// watchHeld lists the pools' Leases until stop is closed and returns the
// most desktops alice held at any one look.
func watchHeld(t *testing.T, s Store, pools []string, stop <-chan struct{}) <-chan int {
	out := make(chan int, 1)
	leases := s.Open(t)
	go func() {
		most := 0
		for {
			n := 0
			for _, p := range pools {
				list, _ := leases.List(context.Background(), s.Namespace, p)
				for _, l := range list {
					if l.Holder == "alice" && !l.Expired(time.Now()) {
						n++
					}
				}
			}
			most = max(most, n)
			select {
			case <-stop:
				out <- most
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return out
}

func testOneUserRace(t *testing.T, s Store) {
	t.Run("SamePool", func(t *testing.T) {
		stop := make(chan struct{})
		most := watchHeld(t, s, []string{"mine"}, stop)
		procs := spawnUser(t, s, job{Namespace: s.Namespace, Pool: "mine", Members: 10, Running: 5})
		members := map[string]int{}
		for i, p := range procs {
			for _, r := range p.wait(t, i) {
				if r.Code != "" {
					t.Errorf("claim %d of alice: %s: %s; want her desktop", i, r.Code, r.Err)
				}
				members[r.Member]++
			}
		}
		close(stop)
		if len(members) != 1 {
			t.Errorf("alice's %d racing claims over %d portals got %v; want one desktop every time", userClaims, racePortals, members)
		}
		if n := <-most; n > 1 {
			t.Errorf("alice held %d desktops of one pool at once; want at most 1", n)
		}
	})
	t.Run("QuotaEdge", func(t *testing.T) { testQuotaEdge(t, s) })
	t.Run("Quota", func(t *testing.T) {
		pools := make([]string, quotaPools)
		for i := range pools {
			pools[i] = fmt.Sprintf("q%d", i+1)
		}
		stop := make(chan struct{})
		most := watchHeld(t, s, pools, stop)
		procs := spawnUser(t, s, job{Namespace: s.Namespace, Pools: pools, Members: quotaPerPool, Running: quotaPerPool, MaxPerUser: quotaMax})
		won, refused := map[string]bool{}, 0
		for i, p := range procs {
			for _, r := range p.wait(t, i) {
				switch {
				case r.Code == "":
					won[r.Member] = true
				case r.Code == vdi.EConflict && strings.Contains(r.Err, "CORRAL_VDI_MAX_DESKTOPS_PER_USER"):
					refused++
				default:
					t.Errorf("alice got %s: %s; want a desktop or the quota's refusal", r.Code, r.Err)
				}
			}
		}
		close(stop)
		if n := <-most; n > quotaMax {
			t.Errorf("alice held %d desktops at once; want at most %d", n, quotaMax)
		}
		if len(won) != quotaMax || refused == 0 {
			t.Errorf("alice's claims got desktops %v and %d refusals; want %d desktops, the rest refused", won, refused, quotaMax)
		}
	})
}

// quotaEdgeClaims is how many claims one user makes at once at the edge of
// her quota (QuotaEdge).
const quotaEdgeClaims = 20

// testQuotaEdge: alice holds one desktop short of her quota when 20 of
// her claims start at once on three portals, over several pools. After
// them she holds her quota, no more, and every Lease of hers is a
// desktop some claim of hers was given (or the one she held): none is
// left without its claim.
func testQuotaEdge(t *testing.T, s Store) {
	ctx := context.Background()
	alice := vdi.Identity{Login: "alice"}
	pools := make(Pools, quotaPools)
	names := make([]string, quotaPools)
	for i := range pools {
		names[i] = fmt.Sprintf("edge%d", i+1)
		pools[i] = NewPool(s.Namespace, names[i], quotaPerPool, quotaPerPool)
	}
	svcs := make([]*vdi.Service, racePortals)
	for i := range svcs {
		svcs[i] = vdi.NewService(vdi.Config{Backend: pools, Leases: s.Open(t), Audit: nopAudit{},
			Log: slog.New(slog.DiscardHandler), MaxDesktopsPerUser: quotaMax, LockNamespace: s.Namespace})
	}
	first, err := svcs[0].Claim(ctx, alice, s.Namespace, names[0])
	if err != nil {
		t.Fatal(err)
	}
	given := map[string]bool{first.Name: true}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range quotaEdgeClaims {
		wg.Go(func() {
			d, err := svcs[i%racePortals].Claim(ctx, alice, s.Namespace, names[1+i%(quotaPools-1)])
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				given[d.Name] = true
			case vdi.ErrorCode(err) != vdi.EConflict || !strings.Contains(err.Error(), "CORRAL_VDI_MAX_DESKTOPS_PER_USER"):
				t.Errorf("claim %d of alice at her quota's edge: %v; want a desktop or the quota's refusal", i, err)
			}
		})
	}
	wg.Wait()
	leases := s.Open(t)
	var held []string
	for _, name := range names {
		list, err := leases.List(ctx, s.Namespace, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range list {
			if l.Holder == "alice" && !l.Expired(time.Now()) {
				held = append(held, l.Member)
				if !given[l.Member] {
					t.Errorf("alice's Lease on %s was given to no claim of hers", l.Member)
				}
			}
		}
	}
	if len(held) != quotaMax {
		t.Errorf("after %d claims at once at her quota's edge alice holds %v; want %d desktops", quotaEdgeClaims, held, quotaMax)
	}
	if len(given) != quotaMax {
		t.Errorf("alice's claims were given %v; want %d desktops in all", given, quotaMax)
	}
}

// testAccess checks a pool's access list through the claim rules.
func testAccess(t *testing.T, s Store) {
	ctx := context.Background()
	pool := NewPool(s.Namespace, "fin", 3, 3)
	pool.Access = vdi.Access{Groups: []string{"finance"}, Users: []string{"carol"}}
	svc := service(pool, s.Open(t), nil)
	var mu sync.Mutex
	claim := func(id vdi.Identity) error {
		mu.Lock()
		defer mu.Unlock()
		_, err := svc.Claim(ctx, id, s.Namespace, "fin")
		return err
	}
	if err := claim(vdi.Identity{Login: "bob"}); vdi.ErrorCode(err) != vdi.EForbidden || !strings.Contains(err.Error(), "group finance") {
		t.Errorf("bob's claim = %v; want EForbidden naming group finance", err)
	}
	if pools, _ := svc.Pools(ctx, vdi.Identity{Login: "bob"}); len(pools) != 0 {
		t.Errorf("bob sees pools %v; want none", pools)
	}
	for _, id := range []vdi.Identity{{Login: "alice", Groups: []string{"finance"}}, {Login: "carol"}, {Login: "root", Admin: true}} {
		if err := claim(id); err != nil {
			t.Errorf("%s's claim = %v; want a desktop", id.Login, err)
		}
		if pools, _ := svc.Pools(ctx, id); len(pools) != 1 {
			t.Errorf("%s sees %d pools; want fin", id.Login, len(pools))
		}
	}
	list, _ := s.Open(t).List(ctx, s.Namespace, "fin")
	for _, l := range list {
		if l.Holder == "bob" {
			t.Errorf("bob holds %s after his refused claim", l.Member)
		}
	}
}
