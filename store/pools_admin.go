package store

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// AddLocalMembers adds members to a local pool in one transaction;
// vdi.ErrAlreadyExists when a member of that name exists in any pool.
func (db *DB) AddLocalMembers(ctx context.Context, pool string, names []string) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: add members to %q: %w", pool, err)
	}
	defer tx.Rollback()
	now := db.Now().UnixNano()
	for _, m := range names {
		res, err := tx.ExecContext(ctx, `INSERT INTO local_members (name, pool, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, m, pool, now)
		if err != nil {
			return fmt.Errorf("store: add member %q to %q: %w", m, pool, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: add member %q to %q: %w", m, pool, vdi.ErrAlreadyExists)
		}
	}
	if err := db.syncSize(ctx, tx, pool); err != nil {
		return err
	}
	return tx.Commit()
}

// RemoveLocalMembers removes members from a local pool.
func (db *DB) RemoveLocalMembers(ctx context.Context, pool string, names []string) error {
	tx, err := db.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: remove members from %q: %w", pool, err)
	}
	defer tx.Rollback()
	for _, m := range names {
		if _, err := tx.ExecContext(ctx, `DELETE FROM local_members WHERE name = ? AND pool = ?`, m, pool); err != nil {
			return fmt.Errorf("store: remove member %q from %q: %w", m, pool, err)
		}
	}
	if err := db.syncSize(ctx, tx, pool); err != nil {
		return err
	}
	return tx.Commit()
}

// syncSize keeps the pool row's size column equal to its member count.
func (db *DB) syncSize(ctx context.Context, tx *txn, pool string) error {
	_, err := tx.ExecContext(ctx, `UPDATE local_pools SET size = (SELECT COUNT(*) FROM local_members WHERE pool = ?) WHERE name = ?`, pool, pool)
	if err != nil {
		return fmt.Errorf("store: size of %q: %w", pool, err)
	}
	return nil
}

// SetLocalPoolPolicy replaces a local pool's policy; vdi.ErrNotFound when absent.
func (db *DB) SetLocalPoolPolicy(ctx context.Context, pool string, p vdi.Policy) error {
	buf, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("store: policy of %q: %w", pool, err)
	}
	res, err := db.db.ExecContext(ctx, `UPDATE local_pools SET policy = ? WHERE name = ?`, string(buf), pool)
	if err != nil {
		return fmt.Errorf("store: policy of %q: %w", pool, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: policy of %q: %w", pool, vdi.ErrNotFound)
	}
	return nil
}

// SetLocalPoolAccess replaces who may use a local pool and what one user
// may hold of it; vdi.ErrNotFound when absent.
func (db *DB) SetLocalPoolAccess(ctx context.Context, pool string, a vdi.Access, l vdi.Limits) error {
	access, limits, err := accessJSON(a, l)
	if err != nil {
		return fmt.Errorf("store: access of %q: %w", pool, err)
	}
	res, err := db.db.ExecContext(ctx, `UPDATE local_pools SET access = ?, limits = ? WHERE name = ?`, access, limits, pool)
	if err != nil {
		return fmt.Errorf("store: access of %q: %w", pool, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: access of %q: %w", pool, vdi.ErrNotFound)
	}
	return nil
}

// accessJSON writes a pool's access and limits as stored.
func accessJSON(a vdi.Access, l vdi.Limits) (access, limits string, err error) {
	ab, err := json.Marshal(a)
	if err != nil {
		return "", "", err
	}
	lb, err := json.Marshal(l)
	return string(ab), string(lb), err
}

// SetLocalPoolStandby sets how many free members of a local pool are kept
// powered on, and when more are; vdi.ErrNotFound when absent.
func (db *DB) SetLocalPoolStandby(ctx context.Context, pool string, st vdi.Standby, sched vdi.StandbySchedule) error {
	sj, err := scheduleJSON(sched)
	if err != nil {
		return fmt.Errorf("store: standby of %q: %w", pool, err)
	}
	res, err := db.db.ExecContext(ctx, `UPDATE local_pools SET standby = ?, standby_max = ?, standby_schedule = ? WHERE name = ?`,
		st.Min, st.Max, sj, pool)
	if err != nil {
		return fmt.Errorf("store: standby of %q: %w", pool, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("store: standby of %q: %w", pool, vdi.ErrNotFound)
	}
	return nil
}

// scheduleJSON is sched as the standby_schedule column holds it ("" for
// none).
func scheduleJSON(sched vdi.StandbySchedule) (string, error) {
	if sched.IsZero() {
		return "", nil
	}
	b, err := json.Marshal(sched)
	return string(b), err
}
