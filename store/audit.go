package store

import (
	"context"
	"fmt"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

var _ vdi.AuditLog = (*DB)(nil)

// Record appends an event to the audit log, stamped with the current time.
func (db *DB) Record(ctx context.Context, e vdi.AuditEvent) error {
	return db.RecordAt(ctx, db.Now(), "", e)
}

// RecordAt appends an event that happened at at. A non-empty key makes
// the write idempotent: a second write with the same key adds nothing.
func (db *DB) RecordAt(ctx context.Context, at time.Time, key string, e vdi.AuditEvent) error {
	var k any
	if key != "" {
		k = key
	}
	_, err := db.db.ExecContext(ctx, `INSERT INTO audit (at, actor, action, namespace, target, detail, write_key) VALUES (?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (write_key) DO NOTHING`,
		at.UnixNano(), e.Actor, e.Action, e.Namespace, e.Target, e.Detail, k)
	if err != nil {
		return fmt.Errorf("store: audit %s: %w", e.Action, err)
	}
	return nil
}

// AuditLog returns the newest entries first, at most limit of them.
func (db *DB) AuditLog(ctx context.Context, limit int) ([]AuditEntry, error) {
	return db.audit(ctx, `ORDER BY id DESC LIMIT ?`, limit)
}

// audit reads the entries a query's tail (WHERE, ORDER BY, LIMIT) selects.
func (db *DB) audit(ctx context.Context, tail string, args ...any) ([]AuditEntry, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT id, at, actor, action, namespace, target, detail FROM audit `+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("store: audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Namespace, &e.Target, &e.Detail); err != nil {
			return nil, fmt.Errorf("store: audit log: %w", err)
		}
		e.At = time.Unix(0, at)
		out = append(out, e)
	}
	return out, rows.Err()
}
