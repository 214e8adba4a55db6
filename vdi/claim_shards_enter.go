package vdi

import (
	"context"
	"errors"
	"time"
)

// A claim under this replica's hold of its user's shard (claim_shards.go):
// her turn here, the fence its reads keep, and the writes it notes.

// enter starts a claim of login under this replica's hold of her shard,
// after her turn here: it returns the context the claim runs in (ended
// by the hold's until, reading after the fence), the store it writes
// through (which notes her writes) and the function that ends it; ok is
// false when this replica does not hold her shard with time left.
func (sh *shards) enter(ctx context.Context, login string) (_ context.Context, _ Leases, done func(), ok bool, err error) {
	k := sh.shardOf(login)
	if !sh.holds(k) {
		return nil, nil, nil, false, nil
	}
	pass, err := sh.s.turns.take(ctx, Ref{Namespace: sh.ns, Name: claimLockPrefix + HolderLabel(login)})
	if err != nil {
		return nil, nil, nil, false, Errorf(EUnavailable, "Wait for it to finish, then try again.", "Another claim of yours is still in progress.")
	}
	sh.mu.Lock()
	h := sh.held[k]
	if h == nil || h.leaving || sh.left(h) < shardLeft {
		sh.mu.Unlock()
		pass()
		return nil, nil, nil, false, nil
	}
	h.active++
	after := h.fence
	if rv := h.last[login]; rv != "" {
		after = rv
	}
	left := sh.left(h)
	sh.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, left)
	return WithReadAfter(ctx, after, login), &shardWrites{Leases: sh.s.leases, sh: sh, h: h, login: login}, func() {
		cancel()
		sh.mu.Lock()
		if h.active--; h.active == 0 && h.idle != nil {
			close(h.idle)
			h.idle = nil
		}
		sh.mu.Unlock()
		pass()
	}, true, nil
}

// holds reports whether this replica holds shard k with time left.
func (sh *shards) holds(k int) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h := sh.held[k]
	return h != nil && !h.leaving && sh.left(h) >= shardLeft
}

// left returns how long hold h has left on this replica's clock.
func (sh *shards) left(h *shardHold) time.Duration { return h.until.Sub(sh.clock.Now()) }

// holder returns where the holder of shard k is reached, as its Lease
// says: from the store's list of the shards' Leases (on Kubernetes its
// watch cache, which a handover reaches in a watch event), or, with fresh
// or when the list shows no holder that runs, from the store itself (a
// request to the API server, which a forward per claim paid on every
// claim). A holder the list shows a moment late answers the forward
// "not holder", and the claim then looks again with fresh. ok is false
// when the shard has no holder that runs, and err is the store's refusal
// to read the Lease.
func (sh *shards) holder(ctx context.Context, k int, fresh bool) (url string, self bool, ok bool, err error) {
	ref, now := sh.ref(k), sh.s.now()
	var cur *Lease
	if !fresh {
		listed, err := sh.s.leases.List(ctx, ref.Namespace, ShardPool)
		if err == nil {
			for _, l := range listed {
				// This replica's own hold, which it did not enter
				// (being let go, or short of time), is read as the
				// store has it.
				if l.Member == ref.Name && !l.Expired(now) && l.Annotations[AnnotationShardURL] != "" && l.Holder != sh.self() {
					cur = l
				}
			}
		}
	}
	if cur == nil {
		if cur, err = sh.s.leases.Get(ctx, ref); errors.Is(err, ErrNotFound) {
			return "", false, false, nil
		} else if err != nil {
			return "", false, false, err
		} else if cur.Expired(now) {
			return "", false, false, nil
		}
	}
	return cur.Annotations[AnnotationShardURL], cur.Holder == sh.self(), cur.Annotations[AnnotationShardURL] != "", nil
}

// shardWrites is the store a claim under a hold writes through: it notes
// each write's resourceVersion as its user's last, and a write whose
// answer was lost as UnknownVersion.
type shardWrites struct {
	Leases
	sh    *shards
	h     *shardHold
	login string
}

func (w *shardWrites) Create(ctx context.Context, l *Lease) (*Lease, error) {
	out, err := w.Leases.Create(ctx, l)
	w.note(out, err)
	return out, err
}

func (w *shardWrites) Update(ctx context.Context, l *Lease) (*Lease, error) {
	out, err := w.Leases.Update(ctx, l)
	w.note(out, err)
	return out, err
}

func (w *shardWrites) note(l *Lease, err error) {
	rv := ""
	switch {
	case err == nil && l != nil:
		rv = l.ResourceVersion
	case err != nil && !errors.Is(err, ErrAlreadyExists) && !errors.Is(err, ErrConflict):
		// No answer, or none that says nothing was written (the API
		// server went away while it wrote): the write may be made, and
		// her next claim here must not take a cache's word that she
		// holds nothing, or it gives her a second desktop.
		rv = UnknownVersion
	default:
		return
	}
	w.sh.mu.Lock()
	w.h.last[w.login] = rv
	w.sh.mu.Unlock()
}
