package vdi

import (
	"hash/maphash"
	"sync"
	"time"
)

// spread orders a pool's free members the way a claim tries them within
// a rank, on every store: rendezvous hashing of the member and the claim
// (its user, with a key of the portal, its seed), so concurrent claims
// try different members first, and their batches (LeaseBatcher) differ
// from their first member on. Within one portal that alone would still
// let two claims pick the same first member as often as birthdays match,
// so a claim there also skips the members this portal's other claims are
// writing (see trying).
type spread struct {
	seed     maphash.Seed
	replicas Replicas // nil: no share of the members preferred
}

// score is m's place in the order of claim, the claiming user.
func (s spread) score(claim string, m *Member) uint64 {
	return scoreOf(s.claimKey(claim), memberHash(m))
}

// claimKey is claim's key in this portal's orders: its hash with the
// portal's seed, made once per claim.
func (s spread) claimKey(claim string) uint64 { return maphash.String(s.seed, claim) }

// scoreOf is the place of the member hashed h (memberHash) in the order
// of the claim keyed key: the pair mixed as a member and a replica are
// for shares, so a claim ranking a thousand members hashes each once.
func scoreOf(key, h uint64) uint64 { return mix(h ^ key) }

// trying counts, per member, this portal's claims writing its Lease now,
// and remembers when a claim of this portal last found each taken (won
// it, or lost it to another replica): a claim's list of free members,
// taken before, may not show that yet. The zero value is ready.
type trying struct {
	mu    sync.Mutex
	now   map[Ref]int
	taken map[Ref]time.Time
}

// pick returns the index of the first member of free, listed at listed,
// that no other claim of this portal is writing now or found taken since (0 when
// every one is: racing for a member is still better than giving up on
// it), and counts it as tried until done.
func (t *trying) pick(free []Member, listed time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.now == nil {
		t.now, t.taken = map[Ref]int{}, map[Ref]time.Time{}
	}
	i := 0
	for j, m := range free {
		if t.now[m.Ref()] == 0 && !t.taken[m.Ref()].After(listed) {
			i = j
			break
		}
	}
	t.now[free[i].Ref()]++
	return i
}

// done ends a try that pick counted; taken says the member is someone's
// now (won, or lost to another claimant).
func (t *trying) done(ref Ref, taken bool, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.now[ref]--; t.now[ref] <= 0 {
		delete(t.now, ref)
	}
	if taken {
		t.taken[ref] = at
	}
	for r, w := range t.taken {
		if at.Sub(w) > takenRemembered {
			delete(t.taken, r) // every list since shows it
		}
	}
}

// takenRemembered is how long trying remembers a member taken: longer
// than a claim takes from its list to its write.
const takenRemembered = time.Minute
