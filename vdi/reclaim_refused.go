package vdi

import (
	"errors"
	"sync"
	"time"
)

// refusedReset is a reset its backend refused before anything was done
// (a member of a Closed pool that carries no definition of its own to be
// made again with): the claim stays as it was, unmarked. It unwraps to
// the backend's error, which says why and what fixes it.
type refusedReset struct{ err error }

func (r refusedReset) Error() string { return r.err.Error() }
func (r refusedReset) Unwrap() error { return r.err }

// refusedLogEvery is how often the reclaim loop logs a member whose reset
// is still refused: it tries again every round, and says so once an hour.
const refusedLogEvery = time.Hour

// refusals is when the reclaim loop last logged each member whose reset
// was refused.
type refusals struct {
	mu     sync.Mutex
	logged map[Ref]time.Time
}

// due reports whether a refusal of ref is to be logged at now (the first,
// or the first refusedLogEvery after the last logged), and notes it.
func (r *refusals) due(ref Ref, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if last, ok := r.logged[ref]; ok && now.Sub(last) < refusedLogEvery {
		return false
	}
	if r.logged == nil {
		r.logged = map[Ref]time.Time{}
	}
	r.logged[ref] = now
	return true
}

// forget drops ref: its reset went ahead, so a later refusal is news.
func (r *refusals) forget(ref Ref) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.logged, ref)
}

// reclaimRefused counts a reclaim by rule that l's backend refused, and
// logs it with what to do once per member per refusedLogEvery: the
// reclaim loop tries again every round, and without a word the claim
// would outlive its rule with only the dashboard's banner to say why.
func (s *Service) reclaimRefused(l *Lease, rule string, refused refusedReset) {
	s.counts.refusedReclaim(rule)
	if !s.refusals.due(l.Ref(), s.now()) {
		return
	}
	args := []any{"desktop", l.Ref(), "holder", l.Holder, "rule", rule}
	if e := new(Error); errors.As(refused.err, &e) {
		args = append(args, "why", e.Msg, "fix", e.Hint)
	} else {
		args = append(args, "err", refused.err)
	}
	s.log.Warn("reclaim refused: the desktop stays claimed until it can be reset; the loop tries again every round", args...)
}
