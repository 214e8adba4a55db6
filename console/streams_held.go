package console

import (
	"context"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A serial console's record names the replica whose console holds the
// line. Its release is one write that can fail (the API server refuses
// or times out): the record then stays, naming a replica that lives on
// and holds no line. So that it does not refuse the holder's serial
// console until that replica restarts, each replica knows the records it
// uses (lines), and a new console finding a record of a live replica
// asks it whether it still uses it (Streams.inUse): a replica that does
// not, and is writing no record of that console, never uses it again,
// and the new console takes the record over by compare-and-swap.

// lines are the records of the consoles this replica shares (serial
// lines, terminals) or is writing. The zero value is ready.
type lines struct {
	mu      sync.Mutex
	held    map[string]string // console key → the record version its line is held under
	writing map[string]int    // console key → record writes in flight
}

// write notes a write of key's record about to be sent; call done with
// the record written (ok) once it returns: from then on the line is held
// under it until letGo.
func (l *lines) write(key string) (done func(o Owner, ok bool)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writing == nil {
		l.writing, l.held = map[string]int{}, map[string]string{}
	}
	l.writing[key]++
	return func(o Owner, ok bool) {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.writing[key]--; l.writing[key] == 0 {
			delete(l.writing, key)
		}
		if ok {
			l.held[key] = o.Version
		}
	}
}

// letGo notes that the line held under key's record version has been
// let go.
func (l *lines) letGo(key, version string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held[key] == version {
		delete(l.held, key)
	}
}

// uses reports whether this replica holds key's line under record
// version, or may be about to (a write of key's record in flight, whose
// version is not known yet).
func (l *lines) uses(key, version string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held[key] == version || l.writing[key] > 0
}

// Holds reports whether this replica holds its console p of ref under the
// record version, or is writing a record of it: another replica asks
// (relay.PeerHolds) before it takes over a serial record naming this
// one, or tells a page that the console it would join is open.
func (s *Streams) Holds(ref vdi.Ref, p vdi.Protocol, version string) bool {
	return s.lines.uses(StreamKey(ref, p), version)
}

// heldAsk bounds the question to the replica a record names.
const heldAsk = 2 * time.Second

// inUse reports whether the live replica record cur names uses it: this
// one by what it knows, another by asking it. A replica that does not
// answer is taken to use it.
func (s *Streams) inUse(ctx context.Context, ref vdi.Ref, p vdi.Protocol, cur Owner) bool {
	if cur.Replica == s.owners.Self() {
		return s.lines.uses(StreamKey(ref, p), cur.Version)
	}
	if cur.URL == "" || len(s.secret) == 0 {
		return true
	}
	ctx, cancel := context.WithTimeout(ctx, heldAsk)
	defer cancel()
	held, err := relay.PeerHolds(ctx, cur.URL, s.secret, string(p), cur.Version, ref.Namespace, ref.Name)
	if err != nil {
		s.log.Debug("the replica holding the console's record did not say whether it uses it", "desktop", ref, "protocol", p, "holder", cur.Replica, "err", err)
		return true
	}
	return held
}
