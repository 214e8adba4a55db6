package handlers

import (
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// RateLimit limits each user's mutating requests (claims, power, release,
// admin changes, sign-out): a token bucket per login.
type RateLimit struct {
	// Every is the time one request's token takes to come back (200ms).
	Every time.Duration
	// Burst is how many requests may come at once (30).
	Burst int
}

// userLimits holds one token bucket per login.
type userLimits struct {
	cfg RateLimit

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// maxBuckets bounds the logins remembered between sweeps.
const maxBuckets = 4096

func newUserLimits(cfg RateLimit) *userLimits {
	if cfg.Every <= 0 {
		cfg.Every = 200 * time.Millisecond
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 30
	}
	return &userLimits{cfg: cfg, buckets: map[string]*bucket{}}
}

// allow takes a token of login's bucket; when there is none it returns
// how long until there is one.
func (l *userLimits) allow(login string, now time.Time) (wait time.Duration, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[login]
	if b == nil {
		if len(l.buckets) >= maxBuckets {
			full := time.Duration(l.cfg.Burst) * l.cfg.Every
			for k, old := range l.buckets { // a bucket idle this long is full again: forget it
				if now.Sub(old.seen) > full {
					delete(l.buckets, k)
				}
			}
		}
		b = &bucket{lim: rate.NewLimiter(rate.Every(l.cfg.Every), l.cfg.Burst)}
		l.buckets[login] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return d, false
	}
	return 0, true
}

// limitUser returns a limitError when id has sent too many mutating
// requests; safe requests always pass.
func (h *guard) limitUser(r *http.Request, id vdi.Identity) error {
	if _, cli := auth.TrustedIdentity(r.Context()); cli || !unsafeMethod(r.Method) {
		return nil // the admin CLI (root on this host) is not limited
	}
	wait, ok := h.limits.allow(id.Login, time.Now())
	if ok {
		return nil
	}
	return &limitError{After: wait, Msg: "Too many changes in a short time.",
		Hint: fmt.Sprintf("Wait %.0fs and try again: each user may make %d changes at once and %d a second after that.",
			math.Ceil(wait.Seconds()), h.limits.cfg.Burst, int(time.Second/h.limits.cfg.Every))}
}
