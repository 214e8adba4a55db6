// Package procgroup signals process groups without hitting a stranger's:
// a group's ID is its leader's PID, which the kernel gives out again once
// the leader is reaped.
package procgroup

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Leader is a started process that leads its own process group (started
// with Setpgid or Setsid), so that signalling the group reaches whatever
// it started too. A leader that has ended but is not yet reaped keeps its
// PID, so until it is reaped the group's ID can be no one else's; after
// that the ID may be given to another process (pid_max can be small), and
// a signal to it would hit a stranger. Leader therefore learns of the end
// without reaping (waitid with WNOWAIT), signals only while unreaped, and
// reaps in Wait alone.
type Leader struct {
	cmd   *exec.Cmd
	ended chan struct{}

	mu     sync.Mutex
	reaped bool
}

// Lead watches cmd, started and leading its own process group.
func Lead(cmd *exec.Cmd) *Leader {
	l := &Leader{cmd: cmd, ended: make(chan struct{})}
	go func() {
		defer close(l.ended)
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	return l
}

// Ended is closed once the leader has ended, before it is reaped.
func (l *Leader) Ended() <-chan struct{} { return l.ended }

// Signal sends sig to the leader's process group, unless the leader has
// been reaped.
func (l *Leader) Signal(sig syscall.Signal) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.reaped {
		_ = syscall.Kill(-l.cmd.Process.Pid, sig)
	}
}

// Wait waits for the leader to end, reaps it and returns cmd.Wait's error.
// It is the only place the leader is reaped.
func (l *Leader) Wait() error {
	<-l.ended
	l.mu.Lock()
	l.reaped = true
	l.mu.Unlock()
	return l.cmd.Wait()
}
