package vdi

import (
	"sync"
	"time"
)

// A reclaim's mark is judged stale as client-go's leader election judges
// a lock, and as the replicas' heartbeats are (kube/heartbeats.go): by
// when this replica saw the marked Lease change (a new ResourceVersion:
// the replica at work renews it every markRenewal, and nothing else
// writes a marked Lease), on this replica's own monotonic clock; never
// by the renew time another replica wrote. So a replica whose clock runs
// minutes ahead never resets a member a second time while another
// still works on it, and one minutes behind still finishes a reclaim a
// crash cut short within about reclaimStale. A mark first seen counts as
// renewed then.

// markSighting is when this replica first saw a marked Lease's version.
type markSighting struct {
	version string
	at      time.Time // on this replica's clock (monotonic)
}

// markSightings keeps the reclaim marks this replica has seen, by member.
// The zero value is ready.
type markSightings struct {
	mu   sync.Mutex
	seen map[Ref]markSighting
}

// renewedWithin records l's mark as seen at now and reports whether it
// changed within stale before now; a Lease without a mark is forgotten.
func (m *markSightings) renewedWithin(l *Lease, now time.Time, stale time.Duration) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !l.reclaiming() {
		delete(m.seen, l.Ref())
		return false
	}
	if m.seen == nil {
		m.seen = map[Ref]markSighting{}
	}
	seen, ok := m.seen[l.Ref()]
	if !ok || seen.version != l.ResourceVersion {
		seen = markSighting{version: l.ResourceVersion, at: now}
		m.seen[l.Ref()] = seen
	}
	return now.Sub(seen.at) < stale
}

// resetting reports whether l is being released or reclaimed right now:
// marked, the mark renewed within reclaimStale of this replica's clock;
// nothing else resets it meanwhile. An older mark is a crash's, which a
// release or the reclaim loop takes over.
func (s *Service) resetting(l *Lease) bool {
	return s.marks.renewedWithin(l, s.now(), reclaimStale)
}
