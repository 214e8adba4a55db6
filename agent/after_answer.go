package agent

import (
	"context"
	"sync"
)

// A tool call's answer is written by the MCP SDK, once the tool's handler
// has returned, so a claim cannot put its user's claim lock's delete off
// until after the answer from inside the handler as the HTTP claim routes
// do (vdi.WithAnswerFirst). Nor can claim_desktop leave it until the
// request ends: after the claim it joins the desktop's screen, which can
// take seconds (20 at most), and the lock would hold her next claim that
// long, up to its running out. So the handler starts the delete as soon as
// the claim returns, beside the rest of its work, and the request waits
// for it only after the SDK has written the answer (Seat.Serve): the
// answer never waits for the delete, and a portal draining for shutdown
// still lets the lock go, as it waits for its requests.

// alongsideKey is the context key of a request's alongside.
type alongsideKey struct{}

// alongside is the work a request's tool calls started that the request
// waits for once answered.
type alongside struct {
	mu     sync.Mutex
	wg     sync.WaitGroup
	closed bool // the request is done waiting: later work runs at once
}

// withAlongside returns ctx for a request's tool calls and the function
// that waits, once the answer is written, for the work they started.
func withAlongside(ctx context.Context) (context.Context, func()) {
	a := &alongside{}
	return context.WithValue(ctx, alongsideKey{}, a), a.wait
}

func (a *alongside) wait() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.wg.Wait()
}

// startAlongside runs f beside the tool call of ctx, which its request
// waits for after answering (withAlongside); it runs f at once where no
// request waits for it, or where the request has ended already (its
// client went away while the tool ran).
func startAlongside(ctx context.Context, f func()) {
	a, ok := ctx.Value(alongsideKey{}).(*alongside)
	if ok {
		a.mu.Lock()
		ok = !a.closed
		if ok {
			a.wg.Add(1)
		}
		a.mu.Unlock()
	}
	if !ok {
		f()
		return
	}
	go func() {
		defer a.wg.Done()
		f()
	}()
}
