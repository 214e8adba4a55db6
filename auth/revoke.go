package auth

import (
	"context"
	"sync"
	"time"
)

// Revocations keeps sign-outs per user: every cookie session of a login
// issued before its time is over. One time per user (not a list of
// session ids) keeps it small and makes "sign out everywhere" the same
// operation.
type Revocations interface {
	// SessionsRevokedBefore returns the time before which login's
	// sessions are revoked; the zero time when none are.
	SessionsRevokedBefore(ctx context.Context, login string) (time.Time, error)
	// RevokeSessions revokes login's sessions issued before t.
	RevokeSessions(ctx context.Context, login string, t time.Time) error
}

// revocationCache remembers each login's sign-out time as last read, for
// revocationFresh, and keeps using it while the database does not answer:
// a sign-out this replica knew of holds through an outage, and users keep
// working when the history database goes away. A login it has never read
// is refused while the database does not answer (a sign-out must hold).
type revocationCache struct {
	Revocations
	now func() time.Time

	mu    sync.Mutex
	known map[string]revocationEntry
}

type revocationEntry struct {
	before, read time.Time
}

// revocationFresh is how long a read sign-out time is used without asking
// again; a sign-out on another replica reaches this one within it.
const revocationFresh = 2 * time.Second

// maxRevocationEntries bounds the cache; beyond it, it starts afresh.
const maxRevocationEntries = 100000

func newRevocationCache(r Revocations, now func() time.Time) *revocationCache {
	return &revocationCache{Revocations: r, now: now, known: map[string]revocationEntry{}}
}

// SessionsRevokedBefore implements Revocations through the cache.
func (c *revocationCache) SessionsRevokedBefore(ctx context.Context, login string) (time.Time, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.known[login]
	c.mu.Unlock()
	if ok && now.Sub(e.read) < revocationFresh {
		return e.before, nil
	}
	before, err := c.Revocations.SessionsRevokedBefore(ctx, login)
	if err != nil {
		if ok {
			return e.before, nil // the database does not answer: what we knew holds
		}
		return time.Time{}, err
	}
	c.remember(login, before, now)
	return before, nil
}

// RevokeSessions implements Revocations, and holds the sign-out on this
// replica at once, even while the database does not answer.
func (c *revocationCache) RevokeSessions(ctx context.Context, login string, t time.Time) error {
	c.remember(login, t, c.now())
	return c.Revocations.RevokeSessions(ctx, login, t)
}

func (c *revocationCache) remember(login string, before, read time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.known) >= maxRevocationEntries {
		c.known = map[string]revocationEntry{}
	}
	if old, ok := c.known[login]; ok && old.before.After(before) {
		before = old.before // a later sign-out never goes back
	}
	c.known[login] = revocationEntry{before: before, read: read}
}
