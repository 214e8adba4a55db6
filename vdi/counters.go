package vdi

import (
	"slices"
	"sync/atomic"
)

// ReclaimRules are the rules the reclaim loop reclaims by, each counted
// (0 too) in Counters.
var ReclaimRules = [...]string{RuleDisconnect, RuleMaxSession, RuleIdle, RuleExpired}

// RefusedRules are what a reset the reclaim loop finds refused was for,
// each counted (0 too) in Counters.ReclaimsRefused: a reclaim rule, or a
// release whose portal died mid-reset (its mark, taken over once stale).
var RefusedRules = [...]string{RuleDisconnect, RuleMaxSession, RuleIdle, RuleExpired, MarkRelease, MarkForceRelease}

// Counters are what this portal's Service counted since it started, for
// the metrics: claims by whether the member won was warm, the races claims
// lost, and the reclaim loop's reclaims by rule.
type Counters struct {
	// ClaimsWarm counts claims whose member was running or starting when
	// won (the warm standby's hits); ClaimsCold those whose member was
	// stopped or failed (it had to be started).
	ClaimsWarm, ClaimsCold uint64
	// RacesLost counts the claims' writes that found their member taken by
	// another claimant meanwhile (its Lease created or taken over first,
	// or every member of a store's one turn gone): each sent its claim on
	// to another member.
	RacesLost uint64
	// Reclaims counts reclaims by rule (ReclaimRules).
	Reclaims map[string]uint64
	// ReclaimsRefused counts, by rule (RefusedRules), the reclaims whose
	// reset the backend refused (a member of a Closed pool with no
	// definition of its own): one each round for as long as the member
	// stays so.
	ReclaimsRefused map[string]uint64
}

// counters is the Service's live count.
type counters struct {
	warm, cold atomic.Uint64
	lost       atomic.Uint64
	reclaims   [len(ReclaimRules)]atomic.Uint64 // in ReclaimRules' order
	refused    [len(RefusedRules)]atomic.Uint64 // in RefusedRules' order
}

// claimed counts a claim won on a member of power p.
func (c *counters) claimed(p Power) {
	if p.warm() {
		c.warm.Add(1)
	} else {
		c.cold.Add(1)
	}
}

// lostRace counts a claim's write that found its member taken.
func (c *counters) lostRace() { c.lost.Add(1) }

// reclaimed counts a reclaim by rule.
func (c *counters) reclaimed(rule string) {
	if i, ok := ruleIndex(rule); ok {
		c.reclaims[i].Add(1)
	}
}

// refusedReclaim counts a reclaim by rule whose reset was refused.
func (c *counters) refusedReclaim(rule string) {
	if i := slices.Index(RefusedRules[:], rule); i >= 0 {
		c.refused[i].Add(1)
	}
}

// ruleIndex returns rule's place in ReclaimRules, where counts by rule
// are kept.
func ruleIndex(rule string) (int, bool) {
	i := slices.Index(ReclaimRules[:], rule)
	return i, i >= 0
}

// Counters returns what this portal counted since it started.
func (s *Service) Counters() Counters {
	out := Counters{ClaimsWarm: s.counts.warm.Load(), ClaimsCold: s.counts.cold.Load(), RacesLost: s.counts.lost.Load(), Reclaims: map[string]uint64{}, ReclaimsRefused: map[string]uint64{}}
	for i, r := range ReclaimRules {
		out.Reclaims[r] = s.counts.reclaims[i].Load()
	}
	for i, r := range RefusedRules {
		out.ReclaimsRefused[r] = s.counts.refused[i].Load()
	}
	return out
}
