package kube_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// Claims by shard as the shards move between replicas: a takeover, a
// replica giving shards up or joining, one of an earlier release beside.

// TestClaimsByShard_Takeover: a replica that takes a shard over reads its
// users' Leases after its takeover write (the fence), so a user's claim
// there finds the desktop her claim on the shard's last holder won a
// moment before, though its watch has not shown it (held back), and is
// answered with it: without the fence it took a second one.
func TestClaimsByShard_Takeover(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	gate := newWatchGate("/leases")
	defer gate.release()
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 6, 6), 0)
	r0 := f.start("r0", mustLeases(t, c.Config), v)
	r1 := f.start("r1", mustLeases(t, cfg), v)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := vdi.Identity{Login: "alice"}
	gate.hold()
	first, err := r0.Claim(ctx, alice, ns, "p")
	if err != nil {
		t.Fatal(err)
	}
	v.set("r1") // r0 gives its shards up, r1 takes them
	waitShards(t, c, ns, "r1")
	second, err := r1.Claim(ctx, alice, ns, "p")
	if err != nil {
		t.Fatal(err)
	}
	third, err := r0.Claim(ctx, alice, ns, "p") // forwarded to r1
	gate.release()
	if err != nil {
		t.Fatal(err)
	}
	hers := heldIn(t, c, ns, "p", "alice")
	if second.Name != first.Name || third.Name != first.Name || len(hers) != 1 {
		t.Errorf("alice's claims got %s, %s (after the takeover), %s (forwarded), and she holds %v; want one desktop", first.Name, second.Name, third.Name, hers)
	}
}

// TestClaimsByShard_ViewChangesWhileTaking: a replica that takes a shard
// it should hold while the live replicas change under its write (here r0
// takes one as it leaves them; a replica joining is alike) lets the hold
// go at its next pass like its others, so the replica that should hold
// it now does: where it judged the hold by the view it saw after the
// write, called it unwanted and kept it while that view stayed (the last
// stop's CI failure of _Takeover, whose view changed as a claim's wake
// had r0 take its shards).
func TestClaimsByShard_ViewChangesWhileTaking(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 2, 2), 0)
	f.start("r1", mustLeases(t, c.Config), v)
	f.start("r0", &changeOnShardCreate{Leases: mustLeases(t, c.Config), then: func() { v.set("r1") }}, v)
	waitShards(t, c, ns, "r1")
}

// changeOnShardCreate calls then once its first create of a claim
// shard's Lease is written, before its caller hears back.
type changeOnShardCreate struct {
	vdi.Leases
	once sync.Once
	then func()
}

func (c *changeOnShardCreate) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	out, err := c.Leases.Create(ctx, l)
	if err == nil && l.Pool == "claim.shard" {
		c.once.Do(c.then)
	}
	return out, err
}

// TestClaimsByShard_GiveUpRefused: a replica whose deletes of the shards
// it gives up are refused (an API server shedding load) leaves them to
// run out, and the replica that should hold them takes them then, though
// it saw them go quiet seconds after the giver did (it started later):
// where every replica waited one duration, the giver took them back as
// unwanted first and kept them while the replicas stayed.
func TestClaimsByShard_GiveUpRefused(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = refuseShardDeletes(cfg.WrapTransport)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 2, 2), 0)
	f.start("r0", mustLeases(t, cfg), v)
	later := mustLeases(t, c.Config)
	waitShards(t, c, ns, "r0")
	v.set("r1") // r0 gives its shards up; r1 starts a moment later
	f.waitLogged(t, "claim shard not let go", vdi.DefaultShardCount)
	time.Sleep(5 * time.Second) // two of r0's passes see its Leases unchanged
	f.start("r1", later, v)
	waitShards(t, c, ns, "r1")
}

// refuseShardDeletes is a rest.Config WrapTransport (over prev, which
// may be nil) that refuses every delete of a claim shard's Lease.
func refuseShardDeletes(prev func(http.RoundTripper) http.RoundTripper) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		if prev != nil {
			rt = prev(rt)
		}
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodDelete && strings.Contains(req.URL.Path, "/leases/"+vdi.LeasePrefix+"claimshard-") {
				return nil, errors.New("the test refuses deletes of claim shards' Leases")
			}
			return rt.RoundTrip(req)
		})
	}
}

// TestClaimsByShard_ReplicaJoins: while 20 users each claim again and
// again on two replicas, a third joins and the shards move: every user is
// answered with one desktop each time, and holds one at every look.
func TestClaimsByShard_ReplicaJoins(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0", "r1")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 40, 40), 0)
	svcs := []*vdi.Service{f.start("r0", mustLeases(t, c.Config), v), f.start("r1", mustLeases(t, c.Config), v)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	stop := make(chan struct{})
	doubles := watchDoubles(t, c, ns, "p", stop)
	var mu sync.Mutex
	got := map[string]map[string]bool{}
	var wg sync.WaitGroup
	round := func(r int) {
		for u := range 20 {
			wg.Go(func() {
				mu.Lock()
				svc := svcs[(u+r)%len(svcs)]
				mu.Unlock()
				login := fmt.Sprintf("u%d", u)
				d, err := svc.Claim(ctx, vdi.Identity{Login: login}, ns, "p")
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					t.Errorf("round %d, %s: %v", r, login, err)
					return
				}
				if got[login] == nil {
					got[login] = map[string]bool{}
				}
				got[login][d.Name] = true
			})
		}
	}
	for r := range 6 {
		if r == 2 {
			s := f.start("r2", mustLeases(t, c.Config), v)
			mu.Lock()
			svcs = append(svcs, s)
			mu.Unlock()
			v.set("r0", "r1", "r2")
		}
		round(r)
		time.Sleep(500 * time.Millisecond)
	}
	wg.Wait()
	close(stop)
	for login, names := range got {
		if len(names) != 1 {
			t.Errorf("%s's claims were answered with %v; want one desktop", login, names)
		}
	}
	if d := <-doubles; d != "" {
		t.Error(d)
	}
}

// watchDoubles lists pool's Leases in ns until stop is closed and sends
// the first look at which a user held two, "" for none.
func watchDoubles(t *testing.T, c *testcluster.Cluster, ns, pool string, stop <-chan struct{}) <-chan string {
	leases := mustLeases(t, c.Config)
	out := make(chan string, 1)
	go func() {
		for {
			list, _ := leases.List(context.Background(), ns, pool)
			held := map[string][]string{}
			for _, l := range list {
				if !l.Expired(time.Now()) {
					held[l.Holder] = append(held[l.Holder], l.Member)
				}
			}
			for who, ms := range held {
				if len(ms) > 1 {
					out <- fmt.Sprintf("%s held %v at one look; want one", who, ms)
					return
				}
			}
			select {
			case <-stop:
				out <- ""
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return out
}

// waitShards waits until replica holds every claim shard in ns.
func waitShards(t *testing.T, c *testcluster.Cluster, ns, replica string) {
	t.Helper()
	if !shardsHeld(t, c, ns, replica, time.Minute) {
		t.Fatalf("replica %s does not hold every claim shard after a minute; their holders: %s", replica, shardHolders(t, c, ns))
	}
}

// shardHolders lists the claim shards' Leases in ns, by shard, with
// their holders.
func shardHolders(t *testing.T, c *testcluster.Cluster, ns string) string {
	list, err := mustLeases(t, c.Config).List(context.Background(), ns, "claim.shard")
	if err != nil {
		return err.Error()
	}
	slices.SortFunc(list, func(a, b *vdi.Lease) int { return strings.Compare(a.Member, b.Member) })
	var out []string
	for _, l := range list {
		out = append(out, strings.TrimPrefix(l.Member, "claimshard-")+":"+l.Holder)
	}
	return fmt.Sprintf("%d of %d: %s", len(list), vdi.DefaultShardCount, strings.Join(out, " "))
}

// waitShardsTaken waits until every claim shard in ns has a holder.
func waitShardsTaken(t *testing.T, c *testcluster.Cluster, ns string) {
	t.Helper()
	leases := mustLeases(t, c.Config)
	for range 600 {
		if list, err := leases.List(context.Background(), ns, "claim.shard"); err == nil && len(list) == vdi.DefaultShardCount {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("the claim shards have no holders after a minute")
}

// shardsHeld reports whether replica holds every claim shard in ns
// within d.
func shardsHeld(t *testing.T, c *testcluster.Cluster, ns, replica string, d time.Duration) bool {
	leases := mustLeases(t, c.Config)
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		list, err := leases.List(context.Background(), ns, "claim.shard")
		n := 0
		for _, l := range list {
			if l.Holder == replica {
				n++
			}
		}
		if err == nil && n == vdi.DefaultShardCount {
			return true
		}
		if !time.Now().Before(end) {
			return false
		}
	}
}

// TestClaimsByShard_HandOverWaitsForClaims: a replica that gives a shard
// up (another should hold it) lets it go only once its claims under it
// have ended, so a user's claim there, slow to write, and her next claim
// at the new holder never both win: without the wait, the new holder
// read her Leases before the slow write and gave her a second desktop.
func TestClaimsByShard_HandOverWaitsForClaims(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 6, 6), 0)
	slow := &slowCreate{Leases: mustLeases(t, c.Config), holder: "alice", entered: make(chan struct{}), gate: make(chan struct{})}
	r0 := f.start("r0", slow, v)
	r1 := f.start("r1", mustLeases(t, c.Config), v)
	waitShards(t, c, ns, "r0")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice := vdi.Identity{Login: "alice"}
	first := make(chan vdi.Desktop, 1)
	go func() {
		d, err := r0.Claim(ctx, alice, ns, "p")
		if err != nil {
			t.Error(err)
		}
		first <- d
	}()
	<-slow.entered
	v.set("r1") // r0 gives its shards up while alice's claim writes
	// r1 takes all of them only where r0 let go of hers at once: give
	// it the time, then claim for her there.
	shardsHeld(t, c, ns, "r1", 5*time.Second)
	second := make(chan vdi.Desktop, 1)
	go func() {
		d, err := r1.Claim(ctx, alice, ns, "p")
		if err != nil {
			t.Error(err)
		}
		second <- d
	}()
	select { // her second claim answers first only where r0 let go at once
	case d := <-second:
		second <- d
	case <-time.After(3 * time.Second):
	}
	close(slow.gate)
	a, b := <-first, <-second
	hers := heldIn(t, c, ns, "p", "alice")
	if a.Name != b.Name || len(hers) != 1 {
		t.Errorf("alice's slow claim got %s, her claim at the new holder %s, and she holds %v; want one desktop", a.Name, b.Name, hers)
	}
}

// slowCreate holds the first create of a Lease for holder until gate is
// closed, saying so on entered.
type slowCreate struct {
	vdi.Leases
	holder  string
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (s *slowCreate) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	if l.Holder == s.holder {
		first := false
		s.once.Do(func() { first = true })
		if first {
			close(s.entered)
			<-s.gate
		}
	}
	return s.Leases.Create(ctx, l)
}

// heldIn returns the members of pool in ns that holder holds, as the
// apiserver has them.
func heldIn(t *testing.T, c *testcluster.Cluster, ns, pool, holder string) []string {
	t.Helper()
	list, err := mustLeases(t, c.Config).List(context.Background(), ns, pool)
	if err != nil {
		t.Fatal(err)
	}
	var hers []string
	for _, l := range list {
		if l.Holder == holder {
			hers = append(hers, l.Member)
		}
	}
	return hers
}

// TestClaimsByShard_BesideAnEarlierRelease: during a rolling update the
// live replicas include one of an earlier release, without claims by
// shard, which the shards it should hold wait for in vain: after a
// whole duration another replica takes them, and keeps them while the
// replicas stay (where it gave them up at its next pass, and they were
// free again for a duration), so its users' claims are answered.
func TestClaimsByShard_BesideAnEarlierRelease(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0", "earlier")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 20, 20), 0)
	r0 := f.start("r0", mustLeases(t, c.Config), v)
	waitShards(t, c, ns, "r0")
	time.Sleep(5 * time.Second) // two passes of r0's
	if !shardsHeld(t, c, ns, "r0", 0) {
		t.Fatal("r0 let go of shards the replica of the earlier release should hold; want it to keep them while the replicas stay")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 16 {
		if _, err := r0.Claim(ctx, vdi.Identity{Login: fmt.Sprintf("u%d", i)}, ns, "p"); err != nil {
			t.Errorf("claim of u%d: %v", i, err)
		}
	}
}
