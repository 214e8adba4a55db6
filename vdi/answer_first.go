package vdi

import (
	"context"
	"sync"
)

// A claim's answer need not wait for all of its work: letting its user's
// claim lock go (a delete on Kubernetes, the third write of a claim
// there) can follow the answer. A caller that answers someone (an HTTP
// handler) asks for that with WithAnswerFirst and runs the function it
// returns once it has answered, within its request: a portal that drains
// for shutdown waits for its requests, and a lock it left behind would
// hold its user's next claim up to the lock's duration.

// answerFirstKey is the context key of WithAnswerFirst.
type answerFirstKey struct{}

// afterAnswer is the work put off until the answer.
type afterAnswer struct {
	mu   sync.Mutex
	work []func()
}

// WithAnswerFirst returns ctx under which a claim puts off what its answer
// need not wait for, and the function that does it: call it once the
// answer is out (it may be called more than once; only the first does
// the work). Without it a claim does all of its work before it returns.
func WithAnswerFirst(ctx context.Context) (context.Context, func()) {
	a := &afterAnswer{}
	return context.WithValue(ctx, answerFirstKey{}, a), a.run
}

func (a *afterAnswer) run() {
	a.mu.Lock()
	work := a.work
	a.work = nil
	a.mu.Unlock()
	for _, f := range work {
		f()
	}
}

// afterAnswering runs f once ctx's caller has answered (WithAnswerFirst),
// else now.
func afterAnswering(ctx context.Context, f func()) {
	a, ok := ctx.Value(answerFirstKey{}).(*afterAnswer)
	if !ok {
		f()
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.work = append(a.work, f)
}
