package vdi

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"
)

// A claim's trace says where its time went, step by step: her turn, the
// shard's holder looked up, a forward, the lists and the write, a race
// lost and the wait for its winner, a retry's pause. A claim slower than
// slowClaim logs it at Info (every claim at Debug), so a storm's tail can
// be read from the replicas' logs, on the replica that answered and, for
// a forwarded claim, on the one that took it.

// slowClaim is how long a claim takes before its trace is logged at Info.
const slowClaim = 100 * time.Millisecond

// claimTrace is one claim's steps so far.
type claimTrace struct {
	mu    sync.Mutex
	start time.Time
	last  time.Time
	steps []traceStep
}

// traceStep is what a claim did and how long it took.
type traceStep struct {
	what string
	took time.Duration
}

type claimTraceKey struct{}

// withClaimTrace returns ctx carrying a new trace, started now.
func withClaimTrace(ctx context.Context) (context.Context, *claimTrace) {
	now := time.Now()
	t := &claimTrace{start: now, last: now}
	return context.WithValue(ctx, claimTraceKey{}, t), t
}

// step notes that ctx's claim has done what, which took it since its last
// step; nothing without a trace.
func step(ctx context.Context, what string) {
	t, _ := ctx.Value(claimTraceKey{}).(*claimTrace)
	if t == nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	t.steps = append(t.steps, traceStep{what, now.Sub(t.last)})
	t.last = now
	t.mu.Unlock()
}

// took returns how long the claim has taken so far.
func (t *claimTrace) took() time.Duration { return time.Since(t.start) }

// String lists the steps as "what=took", in order.
func (t *claimTrace) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	for i, s := range t.steps {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.what)
		b.WriteByte('=')
		b.WriteString(s.took.Round(10 * time.Microsecond).String())
	}
	return b.String()
}

// logTrace logs t, the trace of a claim of login that ended with err, at
// Info when it was slow or failed, else at Debug.
func (s *Service) logTrace(t *claimTrace, msg, login string, err error) {
	took := t.took()
	log := s.log.Debug
	if took >= slowClaim || failed(err) {
		log = s.log.Info
	}
	log(msg, "user", login, "took", took.Round(10*time.Microsecond), "steps", t.String(), "err", err)
}

// writeStep names a claim's write of a member's Lease that ended with err.
func writeStep(err error) string {
	switch {
	case err == nil:
		return "write"
	case errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict):
		return "write-lost"
	}
	return "write-failed"
}

// enterStep names a claim's entry under this replica's hold of its shard.
func enterStep(ok bool) string {
	if ok {
		return "enter"
	}
	return "enter-not-held"
}

// holderStep names a look at who holds a claim's shard.
func holderStep(ok, self bool) string {
	switch {
	case !ok:
		return "holder-none"
	case self:
		return "holder-self"
	}
	return "holder"
}

// forwardStep names a forward to the shard's holder that ended with err.
func forwardStep(err error) string {
	switch {
	case err == nil:
		return "forward"
	case errors.Is(err, ErrNotHolder):
		return "forward-not-holder"
	}
	return "forward-failed"
}
