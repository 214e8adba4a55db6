package handlers

import (
	"fmt"
	"sync"
	"time"
)

// DefaultMaxConsolesPerUser is CORRAL_VDI_MAX_CONSOLES_PER_USER's default.
const DefaultMaxConsolesPerUser = 10

// consoleCount caps the consoles one user has open at once: each is a
// relay, a desktop stream and, for terminals, a login shell (on
// Kubernetes an exec stream through the API server).
type consoleCount struct {
	max int // <= 0: no cap

	mu       sync.Mutex
	open     map[string]int
	total    int           // consoles open, all users
	draining bool          // new consoles are refused (Drain)
	idle     chan struct{} // closed when total drops to 0 while draining
}

func newConsoleCount(max int) *consoleCount {
	if max == 0 {
		max = DefaultMaxConsolesPerUser
	}
	return &consoleCount{max: max, open: map[string]int{}}
}

// acquire counts a console of login and returns the func that uncounts
// it, or a limitError when login has max open already.
func (c *consoleCount) acquire(login string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.draining {
		return nil, errDraining
	}
	if c.max > 0 && c.open[login] >= c.max {
		return nil, &limitError{After: 5 * time.Second, Msg: fmt.Sprintf("You have %d consoles open, the most one user may.", c.open[login]),
			Hint: "Close a console tab or window (or ask an admin to raise CORRAL_VDI_MAX_CONSOLES_PER_USER), then connect again."}
	}
	c.open[login]++
	c.total++
	var once sync.Once
	return func() {
		once.Do(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.open[login]--; c.open[login] <= 0 {
				delete(c.open, login)
			}
			if c.total--; c.total == 0 && c.idle != nil {
				close(c.idle)
				c.idle = nil
			}
		})
	}, nil
}
