package console

import (
	"context"
	"errors"
	"strconv"
	"sync"
)

// One screen per desktop, cluster-wide: exactly one replica (the owner)
// holds a desktop's upstream console and its hub at a time. The owner is
// recorded where every replica reads it (Owners: a Lease per desktop on
// Kubernetes) and changed only by compare-and-swap, so two replicas that
// race for a desktop cannot both win; every other replica relays its
// clients to the owner's hub over a signed screen link
// (relay.DialPeerScreen).

// Owner is the record of who owns a desktop's screen.
type Owner struct {
	// Replica names the owning replica; URL is where other replicas
	// reach it (its peer links' base URL).
	Replica, URL string
	// Version changes with every write of the record (a resourceVersion);
	// empty: no record.
	Version string
	// Alive reports whether the owning replica still runs (renews its
	// heartbeat); a dead replica's record may be taken over.
	Alive bool
}

// ErrOwnerChanged is returned by Owners.Take when the record is no longer
// the one the caller read: another replica wrote it first.
var ErrOwnerChanged = errors.New("console: the screen's owner record changed")

// ErrNotOwner is why a replica refuses a screen link for a desktop whose
// screen it does not own.
var ErrNotOwner = errors.New("console: this replica does not own the desktop's screen")

// Owners keeps the owner records of desktops' screens. Keys are
// "ns/member" (vdi.Ref.String).
type Owners interface {
	// Self names this replica.
	Self() string
	// Get returns key's record (a zero Version when there is none).
	Get(ctx context.Context, key string) (Owner, error)
	// Take makes this replica key's owner if the record is still prev (a
	// zero prev: if there is none), and returns the new record; else
	// ErrOwnerChanged.
	Take(ctx context.Context, key string, prev Owner) (Owner, error)
	// Release deletes key's record if it is still o.
	Release(ctx context.Context, key string, o Owner) error
}

// LocalOwners keeps owner records in memory, for a portal that is the only
// replica (the local backend): the same code path, one process. The zero
// value is ready and names itself "local".
type LocalOwners struct {
	mu  sync.Mutex
	seq uint64
	by  map[string]Owner
}

var _ Owners = (*LocalOwners)(nil)

// Self returns "local".
func (l *LocalOwners) Self() string { return "local" }

// Get implements Owners.
func (l *LocalOwners) Get(_ context.Context, key string) (Owner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.by[key], nil
}

// Take implements Owners.
func (l *LocalOwners) Take(_ context.Context, key string, prev Owner) (Owner, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[key].Version != prev.Version {
		return Owner{}, ErrOwnerChanged
	}
	if l.by == nil {
		l.by = map[string]Owner{}
	}
	l.seq++
	o := Owner{Replica: l.Self(), Version: strconv.FormatUint(l.seq, 10), Alive: true}
	l.by[key] = o
	return o, nil
}

// Release implements Owners.
func (l *LocalOwners) Release(_ context.Context, key string, o Owner) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by[key].Version == o.Version {
		delete(l.by, key)
	}
	return nil
}
