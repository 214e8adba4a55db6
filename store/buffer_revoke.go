package store

import (
	"context"
	"errors"
	"time"
)

// ErrSignOutPending is what RevokeSessions returns when the sign-out is
// not written yet: the database does not answer. The Buffer keeps trying
// until it is written; until then only this replica honours it.
var ErrSignOutPending = errors.New("store: the sign-out is not written yet; it is retried until the database answers")

// revokeWait is how long RevokeSessions waits for a kept sign-out to be
// written before it says it is still pending.
const revokeWait = 2 * time.Second

// revocation is a sign-out waiting for the database: the latest time of
// one login, and who waits for it.
type revocation struct {
	before  time.Time
	written chan struct{} // closed once before is written
}

// revocationReadTimeout bounds a read of a sign-out time: a database that
// does not answer in it is taken for gone, and the caller falls back on
// what it knew (auth's cache) instead of holding the request.
const revocationReadTimeout = time.Second

// SessionsRevokedBefore reads login's sign-out time from the database, or
// fails within revocationReadTimeout.
func (b *Buffer) SessionsRevokedBefore(ctx context.Context, login string) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, revocationReadTimeout)
	defer cancel()
	return b.db.SessionsRevokedBefore(ctx, login)
}

// RevokeSessions writes a sign-out of login's sessions issued before t.
// While the database does not answer it is kept (never shed, one row per
// login) and retried until written; RevokeSessions waits a little for
// that and returns ErrSignOutPending if it has not happened, so that the
// user can be told.
func (b *Buffer) RevokeSessions(ctx context.Context, login string, t time.Time) error {
	b.mu.Lock()
	down := b.lastErr != nil
	b.mu.Unlock()
	if !down { // else the row waits at once, as the database is known not to answer
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeTimeout)
		err := b.db.RevokeSessions(wctx, login, t)
		cancel()
		if err == nil {
			return nil
		}
		if !transient(err) {
			return err
		}
		b.fail(err)
	}
	b.mu.Lock()
	r := b.revokes[login]
	if r == nil {
		r = &revocation{before: t, written: make(chan struct{})}
		if err := b.enqueue(b.revokeRow(login)); err != nil {
			b.mu.Unlock()
			return err
		}
		b.revokes[login] = r
	} else if t.After(r.before) {
		r.before = t
	}
	b.mu.Unlock()
	select {
	case <-r.written:
		return nil
	case <-time.After(revokeWait):
		return ErrSignOutPending
	case <-ctx.Done():
		return ErrSignOutPending
	}
}

// revokeRow is the kept write of login's latest sign-out. b.mu is held.
func (b *Buffer) revokeRow(login string) pending {
	return pending{what: "sign-out of " + login, class: classProtected, write: func(ctx context.Context) error {
		b.mu.Lock()
		t := b.revokes[login].before
		b.mu.Unlock()
		if err := b.db.RevokeSessions(ctx, login, t); err != nil {
			if !transient(err) { // refused: nobody waits for it in vain
				b.mu.Lock()
				delete(b.revokes, login)
				b.mu.Unlock()
			}
			return err
		}
		b.revoked(login, t)
		return nil
	}}
}

// revoked notes that login's sign-out up to t is written; a later one
// that came meanwhile is kept for a write of its own.
func (b *Buffer) revoked(login string, t time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.revokes[login]
	if r.before.After(t) {
		b.enqueue(b.revokeRow(login))
		return
	}
	close(r.written)
	delete(b.revokes, login)
}
