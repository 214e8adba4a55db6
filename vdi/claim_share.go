package vdi

import "slices"

// Replicas names the portal's replicas as this one sees them (the kube
// backend's heartbeats, kube.ScreenOwners), so that their claims split a
// pool's members between them (share).
type Replicas interface {
	// Live returns this replica's name and the names of the replicas
	// that take claims now, this one among them when it does; an empty
	// live means not known.
	Live() (self string, live []string)
}

// share is the part of a pool's members a replica's claims try first:
// those that rendezvous hashing of member and replica gives to it among
// the live replicas. Replicas whose claims choose at the same moment,
// each without seeing the other's writes yet, then try different members
// first, where each claim's own order (spread) alone lets claims on
// different replicas overlap by about (replicas choose 2) × (claims per
// replica)² ÷ members. It only orders: a claim whose replica's share has
// no free member goes on to the others' (as a claim on a replica that
// died leaves its share to them), so no claim fails because of it, and
// replicas that see different live sets for a moment (one joined, one
// died) only overlap more for that moment. Every replica must hash
// alike: the hash has no per-process seed.
type share struct {
	self   uint64   // this replica's hash
	others []uint64 // the other live replicas'
}

// shareOf returns the share of the replica that r says this one is; ok
// is false when there is none to prefer (no Replicas, none known, this
// replica not among the live ones, or alone among them).
func shareOf(r Replicas) (s share, ok bool) {
	if r == nil {
		return share{}, false
	}
	self, live := r.Live()
	if len(live) < 2 || !slices.Contains(live, self) {
		return share{}, false
	}
	s.self = hashString(self)
	for _, name := range live {
		if name != self {
			s.others = append(s.others, hashString(name))
		}
	}
	return s, true
}

// mine reports whether member m (namespace/name) is this replica's.
func (s share) mine(m Member) bool { return s.ownerOf(memberHash(&m)) == 0 }

// owner returns whose share member m (namespace/name) is: 0 this
// replica's, i+1 others[i]'s (see ownerOf).
func (s share) owner(m Member) int { return s.ownerOf(memberHash(&m)) }

// ownerOf returns whose share the member hashed h (memberHash) is: the
// replica whose score with it beats every other's (a tie, as rare as a
// 64-bit collision, goes to the replica with the lower hash, on every
// replica alike).
func (s share) ownerOf(h uint64) int {
	best, hash, score := 0, s.self, mix(h^s.self)
	for i, o := range s.others {
		if theirs := mix(h ^ o); theirs > score || (theirs == score && o < hash) {
			best, hash, score = i+1, o, theirs
		}
	}
	return best
}

// memberHash is hashString of m's "namespace/name", without making that
// string.
func memberHash(m *Member) uint64 {
	return fnv1a(fnv1a(fnv1a(fnvOffset, m.Namespace), "/"), m.Name)
}

// count returns how many shares the live replicas split the members into.
func (s share) count() int { return 1 + len(s.others) }

// hashString is FNV-1a (64-bit) of s: the same in every process, and in
// every release (replicas of two releases split members alike).
func hashString(s string) uint64 { return fnv1a(fnvOffset, s) }

// FNV-1a's 64-bit offset basis and prime (hash/fnv's, which a claim
// ranking a thousand members paid an allocation or two each to use).
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

// fnv1a continues FNV-1a hash h over s.
func fnv1a(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// mix is SplitMix64's finaliser: FNV's nearby inputs (replica-0,
// replica-1) give nearby hashes, which rendezvous hashing must not
// compare raw.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
