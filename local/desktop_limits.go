package local

import (
	"errors"
	"syscall"
	"time"
)

// limitPollEvery is how often a desktop's cgroup is checked for a limit
// the kernel enforced.
const limitPollEvery = time.Second

// watchLimits ends the desktop, with the reason, once the kernel enforced
// one of its cgroup's limits (a process killed for memory, a fork refused
// at the process limit): a desktop at its bounds is a broken desktop, and
// the dashboard then says why it failed.
func (d *Desktop) watchLimits() {
	cg := d.spec.User.cgroup()
	if cg == nil {
		return
	}
	go func() {
		t := time.NewTicker(limitPollEvery)
		defer t.Stop()
		for {
			select {
			case <-d.done:
				return
			case <-t.C:
			}
			why := cg.limitHit()
			if why == "" {
				continue
			}
			d.mu.Lock()
			stopping := d.stopping
			if !stopping && d.err == nil {
				d.err = errors.New(why)
			}
			d.mu.Unlock()
			if stopping {
				return
			}
			d.log.Warn("desktop killed at its limit", "reason", why)
			d.procs[0].signal(syscall.SIGKILL) // Xvnc: the desktop ends, and is reported failed
			return
		}
	}()
}

// cgroup returns u's cgroup, or nil.
func (u *DesktopUser) cgroup() *desktopCgroup {
	if u == nil {
		return nil
	}
	return u.cg
}

// removeCgroup deletes u's cgroup once none of its processes is left.
func (u *DesktopUser) removeCgroup() { u.cgroup().remove() }
