package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// LocalPool is a pool of the local backend with its member names.
type LocalPool struct {
	vdi.Pool
	Members []string
}

// CreateLocalPool stores a pool and its members in one transaction;
// vdi.ErrAlreadyExists when a pool or member of that name exists.
func (db *DB) CreateLocalPool(ctx context.Context, p LocalPool) error {
	policy, err := json.Marshal(p.Policy)
	if err != nil {
		return fmt.Errorf("store: create pool %q: %w", p.Name, err)
	}
	access, limits, err := accessJSON(p.Access, p.Limits)
	if err != nil {
		return fmt.Errorf("store: create pool %q: %w", p.Name, err)
	}
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: create pool %q: %w", p.Name, err)
	}
	defer tx.Rollback()
	now := db.Now().UnixNano()
	sched, err := scheduleJSON(p.StandbySchedule)
	if err != nil {
		return fmt.Errorf("store: create pool %q: %w", p.Name, err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO local_pools (name, kind, mode, source, size, policy, access, limits, standby, standby_max, standby_schedule, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		p.Name, p.Kind, p.Mode, p.Source, len(p.Members), string(policy), access, limits, p.Standby.Min, p.Standby.Max, sched, now)
	if err != nil {
		return fmt.Errorf("store: create pool %q: %w", p.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: create pool %q: %w", p.Name, vdi.ErrAlreadyExists)
	}
	for _, m := range p.Members {
		res, err := tx.ExecContext(ctx, `INSERT INTO local_members (name, pool, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, m, p.Name, now)
		if err != nil {
			return fmt.Errorf("store: create pool %q: member %q: %w", p.Name, m, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: create pool %q: member %q: %w", p.Name, m, vdi.ErrAlreadyExists)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: create pool %q: %w", p.Name, err)
	}
	return nil
}

// LocalPools returns every local pool with its members, by name.
func (db *DB) LocalPools(ctx context.Context) ([]LocalPool, error) {
	return db.localPools(ctx, "")
}

// localPools returns the local pools with their members; a non-empty name
// reads only that pool (the dashboard reads each pool's members, and a
// full scan per pool grows with the square of the member count).
func (db *DB) localPools(ctx context.Context, name string) ([]LocalPool, error) {
	query := `SELECT p.name, p.kind, p.mode, p.source, p.policy, p.access, p.limits, p.standby, p.standby_max, p.standby_schedule, m.name
		FROM local_pools p LEFT JOIN local_members m ON m.pool = p.name `
	var args []any
	if name != "" { // a separate statement, so that SQLite uses the primary key
		query += `WHERE p.name = ? `
		args = append(args, name)
	}
	rows, err := db.db.QueryContext(ctx, query+`ORDER BY p.name, m.created_at, m.name`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list pools: %w", err)
	}
	defer rows.Close()
	var out []LocalPool
	for rows.Next() {
		var p LocalPool
		var policy, access, limits, sched string
		var member sql.NullString
		if err := rows.Scan(&p.Name, &p.Kind, &p.Mode, &p.Source, &policy, &access, &limits, &p.Standby.Min, &p.Standby.Max, &sched, &member); err != nil {
			return nil, fmt.Errorf("store: list pools: %w", err)
		}
		p.Standby.Max = max(p.Standby.Max, p.Standby.Min) // 0: fixed (and rows from before 0011)
		if len(out) == 0 || out[len(out)-1].Name != p.Name {
			if err := json.Unmarshal([]byte(policy), &p.Policy); err != nil {
				return nil, fmt.Errorf("store: list pools: pool %q policy: %w", p.Name, err)
			}
			if err := json.Unmarshal([]byte(access), &p.Access); err != nil {
				return nil, fmt.Errorf("store: list pools: pool %q access: %w", p.Name, err)
			}
			if err := json.Unmarshal([]byte(limits), &p.Limits); err != nil {
				return nil, fmt.Errorf("store: list pools: pool %q limits: %w", p.Name, err)
			}
			if sched != "" {
				if err := json.Unmarshal([]byte(sched), &p.StandbySchedule); err != nil {
					return nil, fmt.Errorf("store: list pools: pool %q standby schedule: %w", p.Name, err)
				}
			}
			out = append(out, p)
		}
		if member.Valid {
			last := &out[len(out)-1]
			last.Members = append(last.Members, member.String)
			last.Size = len(last.Members)
		}
	}
	return out, rows.Err()
}

// LocalPool returns one local pool, or vdi.ErrNotFound.
func (db *DB) LocalPool(ctx context.Context, name string) (LocalPool, error) {
	pools, err := db.localPools(ctx, name)
	if err != nil {
		return LocalPool{}, err
	}
	for _, p := range pools {
		if p.Name == name {
			return p, nil
		}
	}
	return LocalPool{}, fmt.Errorf("store: pool %q: %w", name, vdi.ErrNotFound)
}

// DeleteLocalPool removes a pool and its members; vdi.ErrNotFound when absent.
func (db *DB) DeleteLocalPool(ctx context.Context, name string) error {
	res, err := db.db.ExecContext(ctx, `DELETE FROM local_pools WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("store: delete pool %q: %w", name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: delete pool %q: %w", name, vdi.ErrNotFound)
	}
	return nil
}
