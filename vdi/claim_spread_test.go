package vdi

import (
	"fmt"
	"hash/maphash"
	"testing"
	"time"
)

// TestFreeMembersSpreadsClaims: claims of different users on one portal
// try different members first (rendezvous hashing of the member and the
// claim), and the ranks still come first.
func TestFreeMembersSpreadsClaims(t *testing.T) {
	o := spread{seed: maphash.MakeSeed()}
	var members []Member
	for i := range 100 {
		members = append(members, Member{Namespace: "ns", Name: fmt.Sprintf("m-%d", i), Power: PowerRunning})
	}
	members[42].Power = PowerStopped
	firsts := map[string]bool{}
	for i := range 20 {
		free := o.freeMembers(members, nil, nil, time.Now(), fmt.Sprintf("user-%d", i), len(members))
		if len(free) != 100 || free[99].Name != "m-42" {
			t.Fatalf("user-%d's order has %d members, last %s; want 100, the stopped m-42 last", i, len(free), free[len(free)-1].Name)
		}
		firsts[free[0].Name] = true
	}
	// 20 users on 100 members: about 18 different first members; one
	// order per portal gives them all the same.
	if len(firsts) < 10 {
		t.Errorf("20 users' claims try %d different members first; want at least 10", len(firsts))
	}
}

// BenchmarkFreeMembers is a claim's ranking of a 1,000-member pool with
// every member free, as at a morning's start.
func BenchmarkFreeMembers(b *testing.B) {
	o := spread{seed: maphash.MakeSeed()}
	var members []Member
	for i := range 1000 {
		members = append(members, Member{Namespace: "ns", Name: fmt.Sprintf("m-%d", i), Pool: "morning", Power: PowerRunning,
			Protocols: []Protocol{ProtocolVNC}})
	}
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		o.freeMembers(members, nil, nil, now, fmt.Sprintf("user-%d", i), claimCandidates)
	}
}
