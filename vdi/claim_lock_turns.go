package vdi

import (
	"context"
	"sync"
)

// A user's claims racing on one portal (two tabs, a script) take turns at
// her claim lock in the portal first, so that at most one of them per
// replica tries the lock Lease while another holds it: each try is a
// create and a get at the apiserver, and fifty claims of hers polling it
// every 100 ms were a thousand requests a second. The next in turn goes
// once the holder here has let the Lease go, which it then takes with
// one create.

// lockTurns hands out the turns at each claim lock. The zero value is
// ready.
type lockTurns struct {
	mu    sync.Mutex
	turns map[Ref]*turn
}

// turn is one lock's: ch holds the claim whose turn it is; n counts the
// claims holding or waiting for it.
type turn struct {
	ch chan struct{}
	n  int
}

// take waits for ref's turn (in the order the claims came) until ctx
// ends, and returns the function that passes it on.
func (t *lockTurns) take(ctx context.Context, ref Ref) (func(), error) {
	t.mu.Lock()
	if t.turns == nil {
		t.turns = map[Ref]*turn{}
	}
	tu := t.turns[ref]
	if tu == nil {
		tu = &turn{ch: make(chan struct{}, 1)}
		t.turns[ref] = tu
	}
	tu.n++
	t.mu.Unlock()
	select {
	case tu.ch <- struct{}{}:
		return func() {
			<-tu.ch
			t.leave(ref, tu)
		}, nil
	case <-ctx.Done():
		t.leave(ref, tu)
		return nil, ctx.Err()
	}
}

// leave forgets ref's turn once no claim holds or waits for it.
func (t *lockTurns) leave(ref Ref, tu *turn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tu.n--; tu.n == 0 {
		delete(t.turns, ref)
	}
}
