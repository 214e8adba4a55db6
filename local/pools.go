package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

var _ vdi.PoolAdmin = (*Backend)(nil)

// CreatePool makes a pool of session desktops named <pool>-1 ... <pool>-N,
// all stopped. Only kind ct exists locally.
func (b *Backend) CreatePool(ctx context.Context, p vdi.Pool) error {
	if p.Namespace != Namespace {
		return vdi.Errorf(vdi.EInvalid, "Use namespace "+Namespace+".", "Local pools live in namespace %s, not %q.", Namespace, p.Namespace)
	}
	if p.Kind != vdi.KindCT {
		return vdi.Errorf(vdi.EInvalid, "Use kind ct (session desktops) here.", "This portal cannot make %s pools.", p.Kind)
	}
	if p.Source == "" {
		p.Source = "session"
	}
	lp := store.LocalPool{Pool: p, Members: memberNames(p.Name, nil, p.Size)}
	if err := b.db.CreateLocalPool(ctx, lp); errors.Is(err, vdi.ErrAlreadyExists) {
		return vdi.Errorf(vdi.EConflict, "Pick another name.", "A pool or desktop named like %s exists already.", p.Name)
	} else if err != nil {
		return err
	}
	b.log.Info("created pool", "pool", p.Name, "size", p.Size, "mode", p.Mode)
	return nil
}

// memberNames returns n new member names of pool that are not in taken,
// numbered from the lowest free number up.
func memberNames(pool string, taken []string, n int) []string {
	var out []string
	for i := 1; len(out) < n; i++ {
		name := pool + "-" + strconv.Itoa(i)
		if !slices.Contains(taken, name) {
			out = append(out, name)
		}
	}
	return out
}

// ResizePool adds stopped members or removes unclaimed ones, stopped ones
// and the highest-numbered first.
func (b *Backend) ResizePool(ctx context.Context, namespace, name string, size int, claimed func(member string) bool) error {
	p, err := b.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	if size > len(p.Members) {
		err := b.db.AddLocalMembers(ctx, name, memberNames(name, p.Members, size-len(p.Members)))
		if errors.Is(err, vdi.ErrAlreadyExists) {
			return vdi.Errorf(vdi.EConflict, "Rename the other pool's desktops, or create a pool with another name.", "A desktop named like %s's new members exists in another pool.", name)
		}
		return err
	}
	var free []string
	for _, m := range p.Members {
		if !claimed(m) {
			free = append(free, m)
		}
	}
	drop := len(p.Members) - size
	if drop > len(free) {
		return vdi.Errorf(vdi.EConflict, "Force-release desktops first, or pick a larger size.",
			"Pool %s has %d claimed desktops; it cannot shrink to %d.", name, len(p.Members)-len(free), size)
	}
	slices.SortStableFunc(free, func(x, y string) int {
		if r := b.rank(x) - b.rank(y); r != 0 {
			return r
		}
		return suffix(y) - suffix(x)
	})
	gone := free[:drop]
	// Out of the pool first, so that no claim can pick them while they stop.
	if err := b.db.RemoveLocalMembers(ctx, name, gone); err != nil {
		return err
	}
	return b.dispose(ctx, gone)
}

// rank orders members for removal: stopped first, running last.
func (b *Backend) rank(name string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rt := b.members[name]; rt != nil && rt.power == vdi.PowerRunning {
		return 1
	}
	return 0
}

func suffix(name string) int {
	n, _ := strconv.Atoi(name[strings.LastIndexByte(name, '-')+1:])
	return n
}

// dispose stops removed members and deletes their folders.
func (b *Backend) dispose(ctx context.Context, names []string) error {
	var errs []error
	for _, name := range names {
		if err := b.stopRemoved(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := b.wipeMember(name); err != nil {
			errs = append(errs, fmt.Errorf("local: wipe %s: %w", name, err))
			continue
		}
		b.sandbox.release(b.memberDir(name))
		if err := os.RemoveAll(filepath.Join(b.dir, "members", name)); err != nil {
			errs = append(errs, fmt.Errorf("local: remove %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// stopRemoved stops a member that is no longer in any pool (Stop looks the
// member up in its pool, which is gone).
func (b *Backend) stopRemoved(ctx context.Context, name string) error {
	b.mu.Lock()
	rt := b.members[name]
	b.mu.Unlock()
	if rt == nil {
		return nil
	}
	select {
	case <-rt.ready:
	case <-ctx.Done():
		return ctx.Err()
	}
	b.mu.Lock()
	d := rt.desktop
	rt.desktop = nil
	delete(b.members, name)
	b.mu.Unlock()
	if d != nil {
		return d.Stop()
	}
	return nil
}

// SetPolicy replaces a local pool's reclaim policy.
func (b *Backend) SetPolicy(ctx context.Context, namespace, name string, p vdi.Policy) error {
	if _, err := b.pool(ctx, namespace, name); err != nil {
		return err
	}
	return b.db.SetLocalPoolPolicy(ctx, name, p)
}

// SetAccess replaces who may use a local pool and what one user may hold.
func (b *Backend) SetAccess(ctx context.Context, namespace, name string, a vdi.Access, l vdi.Limits) error {
	if _, err := b.pool(ctx, namespace, name); err != nil {
		return err
	}
	return b.db.SetLocalPoolAccess(ctx, name, a, l)
}

// SetStandby sets how many free members of a local pool are kept on, and
// when more are.
func (b *Backend) SetStandby(ctx context.Context, namespace, name string, st vdi.Standby, sched vdi.StandbySchedule) error {
	if _, err := b.pool(ctx, namespace, name); err != nil {
		return err
	}
	return b.db.SetLocalPoolStandby(ctx, name, st, sched)
}

// DeletePool stops and removes every member, then the pool.
func (b *Backend) DeletePool(ctx context.Context, namespace, name string) error {
	p, err := b.pool(ctx, namespace, name)
	if err != nil {
		return err
	}
	if err := b.db.DeleteLocalPool(ctx, name); err != nil {
		return err
	}
	b.log.Info("deleted pool", "pool", name)
	return b.dispose(ctx, p.Members)
}
