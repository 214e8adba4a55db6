package store

import (
	"context"
	"fmt"
	"time"
)

// Retention bounds the history tables (audit log, sessions): rows older
// than MaxAge go, and beyond MaxRows the oldest go. Zero means no bound.
type Retention struct {
	MaxAge  time.Duration
	MaxRows int
}

// Prune applies r to the audit log and the session history and returns
// how many rows it removed.
func (db *DB) Prune(ctx context.Context, r Retention) (int64, error) {
	var removed int64
	for _, t := range []struct{ table, at string }{{"audit", "at"}, {"sessions", "opened_at"}} {
		if r.MaxAge > 0 {
			n, err := db.exec(ctx, `DELETE FROM `+t.table+` WHERE `+t.at+` < ?`, db.Now().Add(-r.MaxAge).UnixNano())
			if err != nil {
				return removed, fmt.Errorf("store: prune %s by age: %w", t.table, err)
			}
			removed += n
		}
		if r.MaxRows > 0 {
			n, err := db.exec(ctx, `DELETE FROM `+t.table+` WHERE rowid IN (SELECT rowid FROM `+t.table+
				` ORDER BY `+t.at+` DESC, rowid DESC LIMIT -1 OFFSET ?)`, r.MaxRows)
			if err != nil {
				return removed, fmt.Errorf("store: prune %s by size: %w", t.table, err)
			}
			removed += n
		}
	}
	return removed, nil
}

func (db *DB) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := db.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
