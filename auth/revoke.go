package auth

import (
	"context"
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
