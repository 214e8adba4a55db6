package store

import (
	"context"
	"fmt"
	"time"
)

// OpenSession records a new session; OpenedAt defaults to now.
func (db *DB) OpenSession(ctx context.Context, s Session) error {
	if s.OpenedAt.IsZero() {
		s.OpenedAt = db.Now()
	}
	// A retry of a write whose connection broke mid-way may find it landed.
	_, err := db.db.ExecContext(ctx, `INSERT INTO sessions (id, login, namespace, member, protocol, path, opened_at) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`,
		s.ID, s.Login, s.Namespace, s.Member, s.Protocol, s.Path, s.OpenedAt.UnixNano())
	if err != nil {
		return fmt.Errorf("store: open session %q: %w", s.ID, err)
	}
	return nil
}

// CloseSession records how a session ended and when it last saw input.
func (db *DB) CloseSession(ctx context.Context, id string, bytesIn, bytesOut int64, reason string, lastInput time.Time) error {
	return db.CloseSessionAt(ctx, db.Now(), id, bytesIn, bytesOut, reason, lastInput)
}

// CloseSessionAt is CloseSession for a session that closed at at.
func (db *DB) CloseSessionAt(ctx context.Context, at time.Time, id string, bytesIn, bytesOut int64, reason string, lastInput time.Time) error {
	var input any
	if !lastInput.IsZero() {
		input = lastInput.UnixNano()
	}
	_, err := db.db.ExecContext(ctx, `UPDATE sessions SET closed_at = ?, bytes_in = ?, bytes_out = ?, close_reason = ?, last_input = ? WHERE id = ?`,
		at.UnixNano(), bytesIn, bytesOut, reason, input, id)
	if err != nil {
		return fmt.Errorf("store: close session %q: %w", id, err)
	}
	return nil
}

// Sessions returns the newest sessions first, at most limit of them.
func (db *DB) Sessions(ctx context.Context, limit int) ([]Session, error) {
	return db.sessions(ctx, `ORDER BY opened_at DESC LIMIT ?`, limit)
}

// sessions reads the sessions a query's tail (WHERE, ORDER BY, LIMIT) selects.
func (db *DB) sessions(ctx context.Context, tail string, args ...any) ([]Session, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT id, login, namespace, member, protocol, path, opened_at, COALESCE(closed_at, 0),
		bytes_in, bytes_out, close_reason, COALESCE(last_input, 0) FROM sessions `+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("store: sessions: %w", err)
	}
	defer rows.Close()
	var out []Session
	for rows.Next() {
		var s Session
		var opened, closed, input int64
		if err := rows.Scan(&s.ID, &s.Login, &s.Namespace, &s.Member, &s.Protocol, &s.Path, &opened, &closed, &s.BytesIn, &s.BytesOut, &s.CloseReason, &input); err != nil {
			return nil, fmt.Errorf("store: sessions: %w", err)
		}
		s.OpenedAt = time.Unix(0, opened)
		if closed != 0 {
			s.ClosedAt = time.Unix(0, closed)
		}
		if input != 0 {
			s.LastInput = time.Unix(0, input)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
