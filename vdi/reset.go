package vdi

import (
	"context"
	"encoding/json"
	"errors"
)

// resetOf returns how a reclaim resets l's member, as its pool's mode
// says, whether that is long, and the plan to record on the claim's mark
// (AnnotationReset) when it made a new one. On a cluster (a PoolGrower)
// every reset is long: it waits on the cluster — a VM guest's shutdown, a
// re-clone, a CT Pod's deletion (its kubelet's grace) — so it goes on
// detached; a local one is quick and stays inline.
//
// An ephemeral member of a pool whose growing is long (a PoolGrower: a VM
// pool on Kubernetes, where a reset deletes the old VM and clones a new
// one) is reset from a plan — its pool's definition and source, and the
// member — taken while the member is still there and recorded with the
// mark, before anything is deleted. A replica that takes over a reclaim
// whose portal died between the deletion and the clone then makes the
// member again, carrying its pool's access and policy, rather than find
// it gone and let the claim go (the pool would shrink by one, silently).
// A plan recorded by an earlier attempt is used as it is; a member of a
// pool whose definition cannot be read, or one already gone, is reset as
// before: Recreate, and a member that is gone has nothing to reset.
func (s *Service) resetOf(ctx context.Context, l *Lease) (reset func(context.Context) error, long bool, plan string, err error) {
	ref := l.Ref()
	pg, grows := s.backend.(PoolGrower)
	if rec := l.Annotations[AnnotationReset]; rec != "" && grows {
		var g Growth
		if err := json.Unmarshal([]byte(rec), &g); err == nil && len(g.Members) == 1 && g.Members[0] == ref.Name &&
			g.Pool.Namespace == ref.Namespace && g.Pool.Name == l.Pool {
			return regrow(pg, g), true, "", nil
		}
		s.log.Warn("unreadable reset plan on a claim being reclaimed; planning again", "desktop", ref, "annotation", AnnotationReset)
	}
	p, err := s.backend.Pool(ctx, l.Namespace, l.Pool)
	switch {
	case ErrorCode(err) == ENotFound:
		// A pool or member that is gone (deleted by hand) has nothing to
		// reset.
		return func(context.Context) error { return nil }, false, "", nil
	case err != nil:
		return nil, false, "", err
	case p.Mode != ModeEphemeral:
		// Nothing is deleted for good, so a stop needs no plan: a replica
		// that takes it over stops the member again.
		return unlessGone(s.backend.Stop, ref), grows, "", nil
	}
	if grows {
		g, err := pg.PlanRecreate(ctx, ref)
		switch {
		case err == nil:
			b, err := json.Marshal(g)
			if err != nil {
				return nil, false, "", err
			}
			return regrow(pg, g), true, string(b), nil
		case !errors.Is(err, ErrNotAJob) && ErrorCode(err) != ENotFound:
			return nil, false, "", err
		}
	}
	// A member made fresh at once (a CT's new Pod, from its pool's
	// definition as it reads then) needs no plan either: a replica that
	// takes it over makes it fresh again.
	return unlessGone(s.backend.Recreate, ref), grows, "", nil
}

// regrow makes g's one member fresh: it is recreated while it is still
// the member g.Replaces names, made again from g if it is gone, and left
// as it is if it was made fresh already. Every error keeps the claim.
func regrow(pg PoolGrower, g Growth) func(context.Context) error {
	return func(ctx context.Context) error { return pg.Grow(ctx, g, nil) }
}

// unlessGone runs step on ref; a member that is gone has nothing to reset.
func unlessGone(step func(context.Context, Ref) error, ref Ref) func(context.Context) error {
	return func(ctx context.Context) error {
		if err := step(ctx, ref); err != nil && ErrorCode(err) != ENotFound {
			return err
		}
		return nil
	}
}
