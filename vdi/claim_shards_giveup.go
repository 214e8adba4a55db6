package vdi

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// A replica's holds of claim shards given up (claim_shards.go): one that
// another replica should hold, while this one runs, and all of them when
// it stops.

// letGo ends this replica's hold h of shard k: no claim starts under it
// from now, and once those running have ended (by its until at the
// latest) its Lease is deleted, so the replica that should hold it
// takes it at once; the other holds are renewed meanwhile. It then tells
// said how the delete went (nil: the Lease is gone).
func (sh *shards) letGo(k int, h *shardHold, said func(k int, err error)) {
	sh.mu.Lock()
	h.leaving = true
	idle := h.idle
	if h.active > 0 && idle == nil {
		idle = make(chan struct{})
		h.idle = idle
	}
	sh.mu.Unlock()
	sh.going.Go(func() {
		if idle != nil {
			select {
			case <-idle:
			case <-sh.clock.After(sh.left(h)):
			}
		}
		sh.mu.Lock()
		delete(sh.held, k)
		sh.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := sh.s.leases.Delete(ctx, h.lease)
		if errors.Is(err, ErrNotFound) {
			err = nil
		}
		said(k, err)
	})
}

// sayLetGo logs how letting shard k go went, for a shard handed over
// while the portal runs.
func (sh *shards) sayLetGo(k int, err error) {
	if err != nil {
		sh.s.log.Warn("claim shard not let go; it runs out by itself", "shard", k, "err", err)
		return
	}
	sh.s.log.Info("claim shard let go", "shard", k)
}

// giveUpAll lets every hold go, waits until they are (the portal stops),
// and says once what it handed over.
func (sh *shards) giveUpAll() {
	sh.mu.Lock()
	held := maps.Clone(sh.held)
	sh.mu.Unlock()
	var mu sync.Mutex
	var given, kept []int
	var why error
	for k, h := range held {
		if h.leaving {
			continue // being let go already: it says so itself
		}
		sh.letGo(k, h, func(k int, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				kept, why = append(kept, k), err
				return
			}
			given = append(given, k)
		})
	}
	sh.going.Wait()
	slices.Sort(given)
	slices.Sort(kept)
	if len(given) > 0 {
		sh.s.log.Info("claim shards given up: their users' claims go to the replicas that take them", "shards", given)
	}
	if len(kept) > 0 {
		sh.s.log.Warn("claim shards not let go; they run out by themselves, and their users' claims wait for that", "shards", kept, "err", why)
	}
}
