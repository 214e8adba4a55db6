package vdi

import (
	"cmp"
	"slices"
	"time"
)

// A claim ranks a pool's free members and tries the first few. A morning's
// pool has a thousand, of which a claim tries one (a handful when it loses
// races), so it keeps only the leading claimCandidates of the order: one
// pass over the members, no sort of them all and no copy of them all
// (BenchmarkFreeMembers). Within that pass a member that cannot be among
// the leaders by its rank alone is not even hashed.

// claimCandidates is how many of a pool's free members a claim ranks at
// a time: more than it tries before it looks again (claimRelistEvery lost
// races, and the members this portal's other claims are writing, which it
// skips), and a store's turn over new members (newLeasesBatch). A claim
// that tries them all ranks again, without the ones it tried.
const claimCandidates = 2 * newLeasesBatch

// ranking keeps the leading members of a claim's order as they are shown
// to it one at a time (add).
type ranking struct {
	sh    share
	split bool // sh is this replica's share among others
	known map[string]*Lease
	tried map[string]bool
	now   time.Time
	login string
	key   uint64 // the claim's (spread.claimKey)
	n     int
	top   []placed // the leaders so far, in order
	slots []Member // their members, in no order (placed.slot)
}

// ranking returns a ranking of the leading n members for a claim of
// login, given the pool's claims (known, by member) and the members the
// claim tried.
func (o spread) ranking(known map[string]*Lease, tried map[string]bool, now time.Time, login string, n int) *ranking {
	sh, split := shareOf(o.replicas)
	return &ranking{sh: sh, split: split, known: known, tried: tried, now: now, login: login, key: o.claimKey(login), n: max(n, 0),
		top: make([]placed, 0, max(n, 0)), slots: make([]Member, 0, max(n, 0))}
}

// add shows m to the ranking, which keeps it if it is among the leading
// n of the order so far: members with no live claim that the claim did
// not try yet, first one assigned to its user before Leases existed (it
// migrates to a Lease now), then running ones (the user gets a desktop
// now), then stopped ones, then the rest; within each group this
// replica's share of the members first (share), each part in the claim's
// own order (spread), so that concurrent claimants do not all race for
// the same member. A member assigned to someone else that never had a
// Lease is theirs, not free. It returns true: show it the next.
func (r *ranking) add(m Member) bool {
	if r.n == 0 || !claimable(&m, r.known[m.Name], r.tried, r.now, r.login) {
		return true
	}
	p := placed{rank: rankOf(&m, r.login)}
	full := len(r.top) == r.n
	if full && p.rank > r.top[r.n-1].rank {
		return true // behind every leader whatever its hashes
	}
	h := memberHash(&m)
	p.theirs = r.split && r.sh.ownerOf(h) != 0
	p.score = scoreOf(r.key, h)
	if full && comparePlaced(p, r.top[r.n-1]) >= 0 {
		return true // behind every leader: most members, once there are n
	}
	j, _ := slices.BinarySearchFunc(r.top, p, comparePlaced)
	if full { // the last leader drops out; m takes its slot
		p.slot = r.top[r.n-1].slot
		r.top = r.top[:r.n-1]
		r.slots[p.slot] = m
	} else {
		p.slot = len(r.slots)
		r.slots = append(r.slots, m)
	}
	r.top = slices.Insert(r.top, j, p)
	return true
}

// leaders returns the leading members shown, in the claim's order.
func (r *ranking) leaders() []Member {
	out := make([]Member, len(r.top))
	for k, p := range r.top {
		out[k] = r.slots[p.slot]
	}
	return out
}

// placed is a member's place in a claim's order: its rank, then this
// replica's share before the others', then the claim's own order.
type placed struct {
	rank   int
	theirs bool // another replica's share: tried after this one's
	score  uint64
	slot   int // its member's in ranking.slots
}

func comparePlaced(a, b placed) int {
	if r := cmp.Compare(a.rank, b.rank); r != 0 {
		return r
	}
	if a.theirs != b.theirs {
		if a.theirs {
			return 1
		}
		return -1
	}
	return cmp.Compare(a.score, b.score)
}

// claimable reports whether a claim of login may try m, whose Lease (nil for
// none) is l.
func claimable(m *Member, l *Lease, tried map[string]bool, now time.Time, login string) bool {
	switch {
	case (l != nil && !l.Expired(now)) || tried[m.Name]:
		return false
	case l == nil && m.AssignedTo != "" && m.AssignedTo != login:
		return false // assigned before Leases existed: its user migrates it
	case m.Closed != "":
		return false // not carrying its pool's definition: fails closed until repaired
	}
	return true
}

// rankOf is m's group in the order of a claim of login.
func rankOf(m *Member, login string) int {
	if m.AssignedTo == login {
		return -1
	}
	switch m.Power {
	case PowerRunning:
		return 0
	case PowerStopped:
		return 1
	case PowerFailed:
		return 3
	}
	return 2
}
