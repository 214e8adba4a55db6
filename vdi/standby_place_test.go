package vdi

import (
	"fmt"
	"testing"
	"time"
)

// TestStandbyAcrossShares: with three live replicas the warm group is
// sized per share (enough for each share's part of the claims arriving
// during a start, 99 times in 100, for every share) and its members are started across the shares,
// the share with the fewest warm ones first, whichever member the
// pool lists first; with no shares the order and size are as before.
func TestStandbyAcrossShares(t *testing.T) {
	live := []string{"portal-a", "portal-b", "portal-c"}
	r := seen{"portal-a", live}
	sh, _ := shareOf(r)
	var cold []Member
	for i := range 60 {
		cold = append(cold, Member{Namespace: "ns", Name: fmt.Sprintf("m-%d", i), Power: PowerStopped})
	}
	// Two warm members already, both in share 0's.
	var warm []Member
	for _, m := range cold {
		if sh.owner(m) == 0 && len(warm) < 2 {
			m.Power = PowerRunning
			warm = append(warm, m)
		}
	}
	var rest []Member
	for _, m := range cold {
		if sh.owner(m) != 0 || (m.Name != warm[0].Name && m.Name != warm[1].Name) {
			rest = append(rest, m)
		}
	}
	placed := placeStandby(r, warm, rest)
	if len(placed) != len(rest) {
		t.Fatalf("placed %d of %d members", len(placed), len(rest))
	}
	count := []int{2, 0, 0}
	for i, m := range placed[:7] {
		count[sh.owner(m)]++
		if i == 3 && fmt.Sprint(count) != "[2 2 2]" {
			t.Errorf("after 4 starts the shares hold %v warm; want [2 2 2] (the empty shares first)", count)
		}
		if i == 4 && fmt.Sprint(count) != "[3 2 2]" {
			t.Errorf("after 5 starts the shares hold %v warm; want [3 2 2] (a tie: the lowest share)", count)
		}
	}
	if fmt.Sprint(count) != "[3 3 3]" {
		t.Errorf("after 7 starts the shares hold %v warm; want [3 3 3]", count)
	}
	if got := placeStandby(nil, warm, rest); got[0].Name != rest[0].Name || got[len(got)-1].Name != rest[len(rest)-1].Name {
		t.Errorf("without shares the order changed: %s..%s", got[0].Name, got[len(got)-1].Name)
	}

	// 4 claims a minute, a 1-minute start: 4 arrive during a start, 1.33
	// at each of three shares; covering those 99 times in 100 takes 10
	// warm members in one share, 6 in each of three.
	demand := Standby{Min: 1, Max: 20}
	for _, tc := range []struct{ shares, want int }{{1, 10}, {3, 18}} {
		if got := demand.Want(4.0/60, time.Minute, tc.shares); got != tc.want {
			t.Errorf("%s.Want(4 claims a minute, 1 min start, %d shares) = %d; want %d", demand, tc.shares, got, tc.want)
		}
	}
	if got := Fixed(2).Want(10, time.Minute, 3); got != 2 {
		t.Errorf("a fixed standby of 2 over 3 shares wants %d; want 2", got)
	}
}
