package leasetest

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The race the issue asks for: 500 claimants with distinct logins on a
// 100-member pool, spread over 3 portal processes.
const (
	raceMembers   = 100
	raceClaimants = 500
	racePortals   = 3
)

// startRace starts racePortals child portals, each with its share of the
// claimants, and lets them go at once.
func startRace(t *testing.T, s Store, pool string, startDelay time.Duration) ([]*proc, []string) {
	t.Helper()
	users := make([]string, raceClaimants)
	shares := make([][]string, racePortals)
	for i := range users {
		users[i] = fmt.Sprintf("user-%03d", i)
		shares[i%racePortals] = append(shares[i%racePortals], users[i])
	}
	procs := make([]*proc, racePortals)
	for i := range procs {
		procs[i] = spawn(t, s, job{Namespace: s.Namespace, Pool: pool, Members: raceMembers, Running: raceMembers / 2,
			Users: shares[i], StartDelay: startDelay})
	}
	waitReady(t, procs)
	for i, p := range procs {
		if _, err := p.stdin.Write([]byte("go\n")); err != nil {
			t.Fatalf("child portal %d: %v", i, err)
		}
	}
	return procs, users
}

// checkLeases checks the store after a race: every Lease of the pool has
// one holder who is one of users, no user holds two, and winners (member by
// user, from the claimants' own results) hold what they were told they got.
// It returns the Leases by member.
func checkLeases(t *testing.T, leases vdi.Leases, ns, pool string, users []string, winners map[string]string) map[string]*vdi.Lease {
	t.Helper()
	list, err := leases.List(context.Background(), ns, pool)
	if err != nil {
		t.Fatal(err)
	}
	byMember := map[string]*vdi.Lease{}
	byHolder := map[string]string{}
	for _, l := range list {
		if byMember[l.Member] != nil {
			t.Errorf("member %s has two Leases: %s and %s", l.Member, byMember[l.Member].Holder, l.Holder)
		}
		byMember[l.Member] = l
		if !slices.Contains(users, l.Holder) {
			t.Errorf("member %s is held by %q, who is no claimant", l.Member, l.Holder)
		}
		if other, ok := byHolder[l.Holder]; ok {
			t.Errorf("%s holds two members: %s and %s", l.Holder, other, l.Member)
		}
		byHolder[l.Holder] = l.Member
	}
	for user, member := range winners {
		if l := byMember[member]; l == nil || l.Holder != user {
			t.Errorf("%s was told it got %s, but the Lease there is %+v", user, member, l)
		}
	}
	return byMember
}

func testRace(t *testing.T, s Store) {
	procs, users := startRace(t, s, "race", 0)
	var results []result
	for i, p := range procs {
		results = append(results, p.wait(t, i)...)
	}
	if len(results) != raceClaimants {
		t.Fatalf("%d claimants answered; want %d", len(results), raceClaimants)
	}
	winners := map[string]string{}
	byMember := map[string]string{}
	conflicts := 0
	for _, r := range results {
		switch {
		case r.Code == "":
			if other, ok := byMember[r.Member]; ok {
				t.Errorf("%s and %s both won %s", other, r.User, r.Member)
			}
			winners[r.User], byMember[r.Member] = r.Member, r.User
		case r.Code == vdi.EConflict:
			conflicts++
		default:
			t.Errorf("%s got %s: %s; want a desktop or a clean conflict", r.User, r.Code, r.Err)
		}
	}
	if len(winners) != raceMembers || conflicts != raceClaimants-raceMembers {
		t.Errorf("%d winners and %d conflicts; want %d and %d", len(winners), conflicts, raceMembers, raceClaimants-raceMembers)
	}
	leases := checkLeases(t, s.Open(t), s.Namespace, "race", users, winners)
	if len(leases) != raceMembers {
		t.Errorf("%d Leases after the race; want %d", len(leases), raceMembers)
	}
	t.Logf("%d claimants on %d members over %d portal processes: %d winners, %d conflicts; claim latency p50 %v, p99 %v",
		raceClaimants, raceMembers, racePortals, len(winners), conflicts, percentile(results, 50), percentile(results, 99))
}

func testCrash(t *testing.T, s Store) {
	// Power-on takes a while, so the kill lands between won Leases and
	// started members as well as in the middle of writes.
	procs, users := startRace(t, s, "crash", 20*time.Millisecond)
	victim := procs[0]
	deadline := time.Now().Add(time.Minute)
	for victim.count() < 5 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAfter := victim.count()
	winners := map[string]string{}
	for i, p := range procs {
		for _, r := range p.wait(t, i) {
			if r.Code == "" {
				winners[r.User] = r.Member
			} else if r.Code != vdi.EConflict {
				t.Errorf("%s got %s: %s; want a desktop or a clean conflict", r.User, r.Code, r.Err)
			}
		}
	}
	leases := s.Open(t)
	byMember := checkLeases(t, leases, s.Namespace, "crash", users, winners)
	// The survivors alone outnumber the members, so every member is taken.
	if len(byMember) != raceMembers {
		t.Errorf("%d Leases after the crash; want %d", len(byMember), raceMembers)
	}
	// Whatever the killed portal left half-made, its holder's retry on
	// another portal finishes: the same member, powered on.
	pool := NewPool(s.Namespace, "crash", raceMembers, 0)
	svc := service(pool, leases, nil)
	halfMade := 0
	for member, l := range byMember {
		if winners[l.Holder] == "" {
			halfMade++ // won by the killed portal, never answered
		}
		d, err := svc.Claim(context.Background(), vdi.Identity{Login: l.Holder}, s.Namespace, "crash")
		if err != nil || d.Name != member || d.Power != vdi.PowerRunning {
			t.Errorf("%s retrying after the crash got %s (%s), %v; want %s running", l.Holder, d.Name, d.Power, err, member)
		}
	}
	t.Logf("killed a portal after it answered %d of its claimants; %d winners answered, %d Leases (%d of them unanswered), all recoverable by their holders",
		killedAfter, len(winners), len(byMember), halfMade)
}

// percentile returns the p-th percentile of the results' latencies.
func percentile(results []result, p int) time.Duration {
	if len(results) == 0 {
		return 0
	}
	lat := make([]time.Duration, len(results))
	for i, r := range results {
		lat[i] = r.Latency
	}
	slices.Sort(lat)
	return lat[min(len(lat)-1, len(lat)*p/100)]
}
