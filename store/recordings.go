package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

const recordingColumns = `id, login, namespace, member, protocol, format, started_at, COALESCE(ended_at, 0), bytes`

// CreateRecording records that a recording began.
func (db *DB) CreateRecording(ctx context.Context, r Recording) error {
	if r.StartedAt.IsZero() {
		r.StartedAt = db.Now()
	}
	_, err := db.db.ExecContext(ctx, `INSERT INTO recordings (id, login, namespace, member, protocol, format, started_at, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, 0)`,
		r.ID, r.Login, r.Namespace, r.Member, r.Protocol, r.Format, r.StartedAt.UnixNano())
	if err != nil {
		return fmt.Errorf("store: create recording %q: %w", r.ID, err)
	}
	return nil
}

// FinishRecording records a recording's end and final size.
func (db *DB) FinishRecording(ctx context.Context, id string, end time.Time, bytes int64) error {
	_, err := db.db.ExecContext(ctx, `UPDATE recordings SET ended_at = ?, bytes = ? WHERE id = ?`, end.UnixNano(), bytes, id)
	if err != nil {
		return fmt.Errorf("store: finish recording %q: %w", id, err)
	}
	return nil
}

// Recording returns one recording; vdi.ErrNotFound when there is none.
func (db *DB) Recording(ctx context.Context, id string) (Recording, error) {
	rs, err := db.recordings(ctx, `WHERE id = ?`, id)
	if err != nil {
		return Recording{}, err
	}
	if len(rs) == 0 {
		return Recording{}, fmt.Errorf("store: recording %q: %w", id, vdi.ErrNotFound)
	}
	return rs[0], nil
}

// Recordings returns the recordings f matches, newest first.
func (db *DB) Recordings(ctx context.Context, f RecordingFilter) ([]Recording, error) {
	conds, args := []string{"1=1"}, []any{}
	for _, c := range []struct {
		col string
		val string
	}{{"namespace", f.Namespace}, {"member", f.Member}, {"login", f.User}} {
		if c.val != "" {
			conds, args = append(conds, c.col+" = ?"), append(args, c.val)
		}
	}
	if !f.Since.IsZero() {
		conds, args = append(conds, "started_at >= ?"), append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		conds, args = append(conds, "started_at < ?"), append(args, f.Until.UnixNano())
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	return db.recordings(ctx, `WHERE `+strings.Join(conds, " AND ")+` ORDER BY started_at DESC LIMIT ?`, append(args, limit)...)
}

// UnfinishedRecordings returns the recordings without an end: in progress,
// or left open by a portal that stopped.
func (db *DB) UnfinishedRecordings(ctx context.Context) ([]Recording, error) {
	return db.recordings(ctx, `WHERE ended_at IS NULL ORDER BY started_at`)
}

// ExpiredRecordings returns the finished recordings that started before t.
func (db *DB) ExpiredRecordings(ctx context.Context, t time.Time) ([]Recording, error) {
	return db.recordings(ctx, `WHERE ended_at IS NOT NULL AND started_at < ? ORDER BY started_at LIMIT 10000`, t.UnixNano())
}

// DeleteRecording removes a recording's metadata.
func (db *DB) DeleteRecording(ctx context.Context, id string) error {
	if _, err := db.db.ExecContext(ctx, `DELETE FROM recordings WHERE id = ?`, id); err != nil {
		return fmt.Errorf("store: delete recording %q: %w", id, err)
	}
	return nil
}

// RecordingBytes returns the size of every finished recording together.
func (db *DB) RecordingBytes(ctx context.Context) (int64, error) {
	var n int64 // PostgreSQL's SUM of BIGINT is NUMERIC: cast it back
	if err := db.db.QueryRowContext(ctx, `SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM recordings`).Scan(&n); err != nil {
		return 0, fmt.Errorf("store: recording bytes: %w", err)
	}
	return n, nil
}

// Recorded returns which of the session ids have a recording.
func (db *DB) Recorded(ctx context.Context, ids []string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	rows, err := db.db.QueryContext(ctx, `SELECT id FROM recordings WHERE id IN (`+strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",")+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: recorded sessions: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: recorded sessions: %w", err)
		}
		out[id] = true
	}
	return out, rows.Err()
}

// recordings reads the recordings a query's tail selects.
func (db *DB) recordings(ctx context.Context, tail string, args ...any) ([]Recording, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+recordingColumns+` FROM recordings `+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("store: recordings: %w", err)
	}
	defer rows.Close()
	var out []Recording
	for rows.Next() {
		var r Recording
		var start, end int64
		if err := rows.Scan(&r.ID, &r.Login, &r.Namespace, &r.Member, &r.Protocol, &r.Format, &start, &end, &r.Bytes); err != nil {
			return nil, fmt.Errorf("store: recordings: %w", err)
		}
		r.StartedAt = time.Unix(0, start)
		if end != 0 {
			r.EndedAt = time.Unix(0, end)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("store: recordings: %w", err)
	}
	return out, nil
}

// RecordingBytesByUser returns the size of each user's recordings together.
func (db *DB) RecordingBytesByUser(ctx context.Context) (map[string]int64, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT login, CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM recordings GROUP BY login`)
	if err != nil {
		return nil, fmt.Errorf("store: recording bytes by user: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var login string
		var n int64
		if err := rows.Scan(&login, &n); err != nil {
			return nil, fmt.Errorf("store: recording bytes by user: %w", err)
		}
		out[login] = n
	}
	return out, rows.Err()
}
