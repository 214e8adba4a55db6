package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

const tokenColumns = `id, login, name, pools, groups_json, admin, hash, created_by, created_at, expires_at, last_used_at, scopes`

// CreateToken keeps a new personal access token (its hash, never the
// token).
func (db *DB) CreateToken(ctx context.Context, t Token) error {
	pools, _ := json.Marshal(t.Pools)
	groups, _ := json.Marshal(t.Groups)
	scopes, _ := json.Marshal(t.Scopes)
	admin := 0
	if t.Admin {
		admin = 1
	}
	_, err := db.db.ExecContext(ctx, `INSERT INTO tokens (`+tokenColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?)`,
		t.ID, t.Login, t.Name, string(pools), string(groups), admin, t.Hash, t.CreatedBy, t.Created.UnixNano(), t.Expires.UnixNano(), string(scopes))
	if err != nil {
		return fmt.Errorf("store: create token %q of %q: %w", t.Name, t.Login, err)
	}
	return nil
}

// TokenByHash returns the token whose hash is hash; vdi.ErrNotFound when
// there is none (never made, or revoked).
func (db *DB) TokenByHash(ctx context.Context, hash string) (Token, error) {
	ts, err := db.tokens(ctx, `WHERE hash = ?`, hash)
	if err != nil {
		return Token{}, err
	}
	if len(ts) == 0 {
		return Token{}, fmt.Errorf("store: token: %w", vdi.ErrNotFound)
	}
	return ts[0], nil
}

// Token returns one token by id; vdi.ErrNotFound when there is none.
func (db *DB) Token(ctx context.Context, id string) (Token, error) {
	ts, err := db.tokens(ctx, `WHERE id = ?`, id)
	if err != nil {
		return Token{}, err
	}
	if len(ts) == 0 {
		return Token{}, fmt.Errorf("store: token %q: %w", id, vdi.ErrNotFound)
	}
	return ts[0], nil
}

// Tokens returns login's tokens (every user's when login is empty),
// newest first.
func (db *DB) Tokens(ctx context.Context, login string) ([]Token, error) {
	if login == "" {
		return db.tokens(ctx, `ORDER BY created_at DESC`)
	}
	return db.tokens(ctx, `WHERE login = ? ORDER BY created_at DESC`, login)
}

// DeleteToken revokes a token; vdi.ErrNotFound when there is none.
func (db *DB) DeleteToken(ctx context.Context, id string) error {
	res, err := db.db.ExecContext(ctx, `DELETE FROM tokens WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("store: delete token %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: delete token %q: %w", id, vdi.ErrNotFound)
	}
	return nil
}

// TouchToken records that token id was used at t.
func (db *DB) TouchToken(ctx context.Context, id string, t time.Time) error {
	_, err := db.db.ExecContext(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, t.UnixNano(), id)
	if err != nil {
		return fmt.Errorf("store: touch token %q: %w", id, err)
	}
	return nil
}

func (db *DB) tokens(ctx context.Context, where string, args ...any) ([]Token, error) {
	rows, err := db.db.QueryContext(ctx, `SELECT `+tokenColumns+` FROM tokens `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("store: tokens: %w", err)
	}
	defer rows.Close()
	var out []Token
	for rows.Next() {
		var t Token
		var pools, groups, scopes string
		var admin int
		var created, expires, used int64
		if err := rows.Scan(&t.ID, &t.Login, &t.Name, &pools, &groups, &admin, &t.Hash, &t.CreatedBy, &created, &expires, &used, &scopes); err != nil {
			return nil, fmt.Errorf("store: tokens: %w", err)
		}
		if err := errors.Join(json.Unmarshal([]byte(pools), &t.Pools), json.Unmarshal([]byte(groups), &t.Groups), json.Unmarshal([]byte(scopes), &t.Scopes)); err != nil {
			return nil, fmt.Errorf("store: token %q: %w", t.ID, err)
		}
		t.Admin, t.Created, t.Expires = admin != 0, time.Unix(0, created), time.Unix(0, expires)
		if used != 0 {
			t.LastUsed = time.Unix(0, used)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
