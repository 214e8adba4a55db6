package store

import (
	"context"
	"strings"
)

// historyWhere renders f as SQL conditions on the given columns.
func historyWhere(f HistoryFilter, userCond, targetCol, timeCol string) (string, []any) {
	conds := []string{"1=1"}
	var args []any
	if f.User != "" {
		conds = append(conds, userCond)
		n := strings.Count(userCond, "?")
		for range n {
			args = append(args, f.User)
		}
	}
	if f.Targets != nil {
		if len(f.Targets) == 0 {
			conds = append(conds, "0=1")
		} else {
			conds = append(conds, targetCol+" IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.Targets)), ",")+")")
			for _, t := range f.Targets {
				args = append(args, t)
			}
		}
	}
	if !f.Since.IsZero() {
		conds = append(conds, timeCol+" >= ?")
		args = append(args, f.Since.UnixNano())
	}
	if !f.Until.IsZero() {
		conds = append(conds, timeCol+" < ?")
		args = append(args, f.Until.UnixNano())
	}
	limit := f.Limit
	if limit <= 0 {
		limit = 1000
	}
	args = append(args, limit)
	return strings.Join(conds, " AND "), args
}

// SessionHistory returns the sessions f matches, newest first.
func (db *DB) SessionHistory(ctx context.Context, f HistoryFilter) ([]Session, error) {
	where, args := historyWhere(f, "login = ?", "member", "opened_at")
	return db.sessions(ctx, `WHERE `+where+` ORDER BY opened_at DESC LIMIT ?`, args...)
}

// OpenSessions returns the sessions not closed yet, newest first. A
// portal that crashed leaves its sessions open: callers check the claim's
// console count before trusting one.
func (db *DB) OpenSessions(ctx context.Context) ([]Session, error) {
	return db.sessions(ctx, `WHERE closed_at IS NULL ORDER BY opened_at DESC LIMIT 10000`)
}

// AuditHistory returns the audit entries f matches, newest first.
func (db *DB) AuditHistory(ctx context.Context, f HistoryFilter) ([]AuditEntry, error) {
	where, args := historyWhere(f, "(actor = ? OR detail = 'to ' || CAST(? AS TEXT) OR "+db.db.d.contains+"(detail, 'holder ' || CAST(? AS TEXT)) > 0)", "target", "at")
	return db.audit(ctx, `WHERE `+where+` ORDER BY id DESC LIMIT ?`, args...)
}
