package vdi

import (
	"fmt"
	"hash/fnv"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// freeMembers returns the leading n members (at most) of the order in
// which a claim of login tries members (see ranking.add), as a claim
// ranks a pool's members walked.
func (o spread) freeMembers(members []Member, known map[string]*Lease, tried map[string]bool, now time.Time, login string, n int) []Member {
	r := o.ranking(known, tried, now, login, n)
	for _, m := range members {
		r.add(m)
	}
	return r.leaders()
}

// mixedPool is a pool of n members as a storm leaves it, seeded: members
// of every power, some held (known), some assigned before Leases existed,
// a few not carrying their definition; and the members a claim tried.
func mixedPool(seed uint64, n int) (members []Member, known map[string]*Lease, tried map[string]bool) {
	rng := rand.New(rand.NewPCG(seed, 60))
	now := time.Now()
	powers := []Power{PowerRunning, PowerRunning, PowerStopped, PowerStopped, PowerStarting, PowerFailed}
	known, tried = map[string]*Lease{}, map[string]bool{}
	for i := range n {
		m := Member{Namespace: "ns", Name: fmt.Sprintf("m-%d", i), Pool: "p", Power: powers[rng.IntN(len(powers))]}
		switch rng.IntN(20) {
		case 0:
			m.AssignedTo = "alice"
		case 1:
			m.AssignedTo = "bob"
		case 2:
			m.Closed = "no definition"
		}
		switch rng.IntN(4) {
		case 0:
			known[m.Name] = &Lease{Namespace: "ns", Member: m.Name, Holder: "someone", RenewTime: now, Duration: time.Hour}
		case 1:
			known[m.Name] = &Lease{Namespace: "ns", Member: m.Name, Holder: "gone", RenewTime: now.Add(-2 * time.Hour), Duration: time.Hour}
		}
		if rng.IntN(10) == 0 {
			tried[m.Name] = true
		}
		members = append(members, m)
	}
	return members, known, tried
}

// TestFreeMembersLeadsTheOrder: a claim's n candidates are the leading n
// of the whole order (as an unbounded ranking gives it), and that order
// holds: assigned to her, running, stopped, the rest, failed; this
// replica's share first within each; the claim's own order within that;
// nothing held, tried, someone else's or closed.
func TestFreeMembersLeadsTheOrder(t *testing.T) {
	o := spread{seed: maphash.MakeSeed(), replicas: seen{"portal-a", []string{"portal-a", "portal-b", "portal-c"}}}
	sh, _ := shareOf(o.replicas)
	now := time.Now()
	for seed := range uint64(20) {
		members, known, tried := mixedPool(seed, 300)
		all := o.freeMembers(members, known, tried, now, "alice", len(members))
		for k, m := range all {
			if l := known[m.Name]; (l != nil && !l.Expired(now)) || tried[m.Name] || m.Closed != "" || (l == nil && m.AssignedTo != "" && m.AssignedTo != "alice") {
				t.Fatalf("seed %d: %s (lease %v, tried %v, closed %q, assigned to %q) is among alice's candidates; want only members she may take", seed, m.Name, l, tried[m.Name], m.Closed, m.AssignedTo)
			}
			if k == 0 {
				continue
			}
			prev := all[k-1]
			a := placed{rank: rankOf(&prev, "alice"), theirs: !sh.mine(prev), score: o.score("alice", &prev)}
			b := placed{rank: rankOf(&m, "alice"), theirs: !sh.mine(m), score: o.score("alice", &m)}
			if comparePlaced(a, b) >= 0 {
				t.Fatalf("seed %d: %s %+v comes before %s %+v; want rank, then this replica's share, then the claim's order", seed, prev.Name, a, m.Name, b)
			}
		}
		for _, n := range []int{1, 2, 5, claimCandidates, len(all) - 1, len(all), len(all) + 5} {
			got := o.freeMembers(members, known, tried, now, "alice", n)
			want := all[:min(n, len(all))]
			if !slices.EqualFunc(got, want, func(a, b Member) bool { return a.Name == b.Name }) {
				t.Fatalf("seed %d: the %d leading candidates are %v; want the whole order's first %d, %v", seed, n, names(got), n, names(want))
			}
		}
	}
}

func names(ms []Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

// TestHashStringIsFNV1a: the replicas' shares hash as FNV-1a of the
// replica's name and of "namespace/member" (hash/fnv's, which an older
// release used): replicas of two releases in a rolling update split the
// members alike.
func TestHashStringIsFNV1a(t *testing.T) {
	for _, s := range []string{"", "a", "portal-0", "corral-vdi-portal-7d9f8c6b5-x2x4q", "ns/m-1", "testsoak-storm-1/morning-823"} {
		h := fnv.New64a()
		h.Write([]byte(s))
		if got, want := hashString(s), h.Sum64(); got != want {
			t.Errorf("hashString(%q) = %x; want FNV-1a's %x", s, got, want)
		}
	}
	sh := share{self: hashString("portal-a"), others: []uint64{hashString("portal-b"), hashString("portal-c")}}
	for i := range 300 {
		m := Member{Namespace: "testsoak-storm-1", Name: fmt.Sprintf("morning-%d", i)}
		h := fnv.New64a()
		h.Write([]byte(m.Namespace + "/" + m.Name))
		best, score := 0, mix(h.Sum64()^sh.self)
		for k, o := range sh.others {
			if s := mix(h.Sum64() ^ o); s > score {
				best, score = k+1, s
			}
		}
		if got := sh.owner(m); got != best {
			t.Fatalf("%s's share is %d; want %d, as FNV-1a of %q gives", m.Ref(), got, best, m.Namespace+"/"+m.Name)
		}
	}
}

// BenchmarkFreeMembersStorm is a claim's ranking of a 1,000-member pool
// in a morning storm's middle, on one of three replicas: half the members
// held, three warm and free, the rest stopped.
func BenchmarkFreeMembersStorm(b *testing.B) {
	o := spread{seed: maphash.MakeSeed(), replicas: seen{"portal-a", []string{"portal-a", "portal-b", "portal-c"}}}
	now := time.Now()
	known := map[string]*Lease{}
	var members []Member
	for i := range 1000 {
		m := Member{Namespace: "ns", Name: fmt.Sprintf("morning-%d", i), Pool: "morning", Power: PowerStopped}
		switch {
		case i < 500:
			m.Power, m.Protocols = PowerRunning, []Protocol{ProtocolTerminal}
			known[m.Name] = &Lease{Namespace: "ns", Member: m.Name, Holder: fmt.Sprintf("user-%d", i), RenewTime: now, Duration: time.Hour}
		case i < 503:
			m.Power, m.Protocols = PowerRunning, []Protocol{ProtocolTerminal}
		}
		members = append(members, m)
	}
	for i := 0; b.Loop(); i++ {
		o.freeMembers(members, known, nil, now, fmt.Sprintf("user-%d", 1000+i), claimCandidates)
	}
}
