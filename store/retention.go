package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Retention bounds the history tables (audit log, sessions): rows older
// than MaxAge go, and beyond MaxRows of one actor (one login's sessions)
// that actor's oldest go. Zero means no bound. Admin and security events
// (ProtectedActions) go by age only: nobody's volume pushes them out.
type Retention struct {
	MaxAge  time.Duration
	MaxRows int
}

// ProtectedActions are the audit actions pruned by age only: what admins
// do and what bears on security.
var ProtectedActions = []string{
	"sign-in", "sign-out", "end-sessions", "assign", "recreate", "force-release", "reclaim",
	"pool-create", "pool-policy", "pool-resize", "pool-delete", "pool-access", "pool-standby",
	"recording-play", "recording-download", "recording-delete", "token-create", "token-revoke",
}

// Prune applies r to the audit log and the session history, and to the
// pools' samples (MaxRows counting each pool's buckets), and returns how
// many audit and session rows it removed; a pruning that removed rows is
// remembered for LastPrune.
func (db *DB) Prune(ctx context.Context, r Retention) (int64, error) {
	protected := "'" + strings.Join(ProtectedActions, "','") + "'"
	var counts [2]int64
	for i, t := range []struct{ table, at, who, routine string }{
		{"audit", "at", "actor", "action NOT IN (" + protected + ")"},
		{"sessions", "opened_at", "login", "TRUE"},
	} {
		if r.MaxAge > 0 {
			n, err := db.exec(ctx, `DELETE FROM `+t.table+` WHERE `+t.at+` < ?`, db.Now().Add(-r.MaxAge).UnixNano())
			if err != nil {
				return counts[0] + counts[1], fmt.Errorf("store: prune %s by age: %w", t.table, err)
			}
			counts[i] += n
		}
		if r.MaxRows > 0 {
			rowid := db.db.d.rowid
			n, err := db.exec(ctx, `DELETE FROM `+t.table+` WHERE `+rowid+` IN (SELECT r FROM (SELECT `+rowid+` AS r, ROW_NUMBER() OVER (PARTITION BY `+t.who+
				` ORDER BY `+t.at+` DESC, `+rowid+` DESC) AS n FROM `+t.table+` WHERE `+t.routine+`) AS ranked WHERE n > ?)`, r.MaxRows)
			if err != nil {
				return counts[0] + counts[1], fmt.Errorf("store: prune %s by size: %w", t.table, err)
			}
			counts[i] += n
		}
	}
	if err := db.prunePoolSamples(ctx, r); err != nil {
		return counts[0] + counts[1], err
	}
	if counts[0]+counts[1] > 0 {
		if _, err := db.exec(ctx, `INSERT INTO prunes (at, audit, sessions) VALUES (?, ?, ?)`, db.Now().UnixNano(), counts[0], counts[1]); err != nil {
			return counts[0] + counts[1], fmt.Errorf("store: note pruning: %w", err)
		}
	}
	return counts[0] + counts[1], nil
}

// LastPrune returns the newest pruning that removed rows, and false when
// none ever did.
func (db *DB) LastPrune(ctx context.Context) (Pruned, bool, error) {
	var p Pruned
	var at int64
	err := db.db.QueryRowContext(ctx, `SELECT at, audit, sessions FROM prunes ORDER BY at DESC LIMIT 1`).Scan(&at, &p.Audit, &p.Session)
	if err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Pruned{}, false, nil
		}
		return Pruned{}, false, fmt.Errorf("store: last prune: %w", err)
	}
	p.At = time.Unix(0, at)
	return p, true, nil
}

func (db *DB) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := db.db.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}
