package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// SessionsRevokedBefore returns the time before which login's cookie
// sessions are revoked (a sign-out, an admin ending them); zero for none.
func (db *DB) SessionsRevokedBefore(ctx context.Context, login string) (time.Time, error) {
	var before int64
	err := db.db.QueryRowContext(ctx, `SELECT before FROM session_revocations WHERE login = ?`, login).Scan(&before)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("store: sign-outs of %q: %w", login, err)
	}
	return time.Unix(0, before), nil
}

// RevokeSessions revokes login's cookie sessions issued before t; an
// earlier t than the one kept changes nothing.
func (db *DB) RevokeSessions(ctx context.Context, login string, t time.Time) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO session_revocations (login, before) VALUES (?, ?)
		ON CONFLICT (login) DO UPDATE SET before = `+db.db.d.greatest+`(session_revocations.before, excluded.before)`, login, t.UnixNano())
	if err != nil {
		return fmt.Errorf("store: revoke sessions of %q: %w", login, err)
	}
	return nil
}
