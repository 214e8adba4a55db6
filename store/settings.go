package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// UserSetting returns login's setting name, or "" when login has none.
func (db *DB) UserSetting(ctx context.Context, login, name string) (string, error) {
	var v string
	err := db.db.QueryRowContext(ctx, `SELECT value FROM user_settings WHERE login = ? AND name = ?`, login, name).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: setting %q of %q: %w", name, login, err)
	}
	return v, nil
}

// SetUserSetting keeps value as login's setting name, made at.
func (db *DB) SetUserSetting(ctx context.Context, login, name, value string, at time.Time) error {
	_, err := db.db.ExecContext(ctx, `INSERT INTO user_settings (login, name, value, updated_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (login, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		login, name, value, at.UnixNano())
	if err != nil {
		return fmt.Errorf("store: set setting %q of %q: %w", name, login, err)
	}
	return nil
}
