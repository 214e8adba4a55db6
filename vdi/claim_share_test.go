package vdi

import (
	"fmt"
	"hash/maphash"
	"slices"
	"testing"
	"time"
)

// seen is Replicas as one replica sees them.
type seen struct {
	self string
	live []string
}

func (r seen) Live() (string, []string) { return r.self, r.live }

// TestShareSplitsMembers: the live replicas' shares split a pool's
// members, each member in exactly one share and each share about its
// part; a replica's claims try its own share first within each rank,
// then the others'; when one replica dies only its members move; a
// replica that is not among the live ones (draining, its heartbeat
// failing) or alone prefers none.
func TestShareSplitsMembers(t *testing.T) {
	var members []Member
	for i := range 300 {
		members = append(members, Member{Namespace: "ns", Name: fmt.Sprintf("m-%d", i), Power: PowerRunning})
	}
	three := []string{"portal-a", "portal-b", "portal-c"}
	owners := func(live []string) map[string]string {
		t.Helper()
		owner := map[string]string{}
		for _, m := range members {
			for _, r := range live {
				s, ok := shareOf(seen{r, live})
				if !ok {
					t.Fatalf("%s among %v has no share", r, live)
				}
				if s.mine(m) {
					if o := owner[m.Name]; o != "" {
						t.Fatalf("%s is in the shares of %s and %s", m.Name, o, r)
					}
					owner[m.Name] = r
				}
			}
			if owner[m.Name] == "" {
				t.Fatalf("%s is in no share of %v", m.Name, live)
			}
		}
		return owner
	}
	before := owners(three)
	count := map[string]int{}
	for _, r := range before {
		count[r]++
	}
	for _, r := range three {
		// 100 expected; a binomial's standard deviation is 8.
		if count[r] < 70 || count[r] > 130 {
			t.Errorf("%s's share is %d of 300 members; want about 100", r, count[r])
		}
	}
	after := owners(three[:2]) // portal-c died
	for name, r := range before {
		if r != "portal-c" && after[name] != r {
			t.Errorf("%s moved from %s to %s when portal-c died; only portal-c's members may move", name, r, after[name])
		}
	}

	members[7].Power = PowerStopped
	o := spread{seed: maphash.MakeSeed(), replicas: seen{"portal-a", three}}
	free := o.freeMembers(members, nil, nil, time.Now(), "alice", len(members))
	if len(free) != 300 || free[299].Name != "m-7" {
		t.Fatalf("the order has %d members, last %s; want 300, the stopped m-7 last whatever its share", len(free), free[len(free)-1].Name)
	}
	first := count["portal-a"]
	if before["m-7"] == "portal-a" {
		first--
	}
	for i, m := range free[:299] {
		if mine := before[m.Name] == "portal-a"; mine != (i < first) {
			t.Fatalf("portal-a's order has %s (portal-a's: %v) at %d; want its %d running members first", m.Name, mine, i, first)
		}
	}

	alone := spread{seed: o.seed}
	want := alone.freeMembers(members, nil, nil, time.Now(), "alice", len(members))
	for _, r := range []Replicas{seen{"portal-a", []string{"portal-b", "portal-c"}}, seen{"portal-a", []string{"portal-a"}}, seen{"portal-a", nil}} {
		o.replicas = r
		if got := o.freeMembers(members, nil, nil, time.Now(), "alice", len(members)); !slices.EqualFunc(got, want, func(a, b Member) bool { return a.Name == b.Name }) {
			self, live := r.Live()
			t.Errorf("%s seeing %v live orders by a share; want the claim's own order", self, live)
		}
	}
}
