package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/procgroup"
	"golang.org/x/sys/unix"
)

// desktopProc is one process of a desktop. Its PID alone is not an identity:
// PIDs are recycled, so every check also compares the start time the kernel
// recorded when we forked it.
type desktopProc struct {
	Name  string `json:"name"`
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // /proc/<pid>/stat field 22, clock ticks since boot

	// exited is closed once Wait has reaped the process; nil for processes
	// adopted from a previous portal, which we cannot Wait on.
	exited  chan struct{}
	waitErr error             // set before exited is closed
	lead    *procgroup.Leader // signals our own child's group; nil when adopted
}

// desktopPids is the content of <Dir>/pids.
type desktopPids struct {
	Display int            `json:"display"` // -1 until Xvnc reported it
	Procs   []*desktopProc `json:"procs"`
}

// startDesktopProc starts path as a child in its own process group with its
// output in <dir>/<name>.log. It deliberately sets no Pdeathsig: desktops
// outlive the portal and are adopted by the next one. With a user, the
// child runs as that uid and gid with no supplementary groups, under its
// limits (prlimit sets them, then execs path); nil runs it as the portal.
func startDesktopProc(name, dir, path string, args, env []string, cwd string, extra []*os.File, user *DesktopUser) (*desktopProc, error) {
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := user.command(path, args...)
	cmd.Dir = cwd
	user.setEnv(cmd, env)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.ExtraFiles = extra
	cmd.SysProcAttr = user.sysProcAttr(&syscall.SysProcAttr{Setpgid: true})
	defer closeCgroupFD(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &desktopProc{Name: name, PID: cmd.Process.Pid, exited: make(chan struct{}), lead: procgroup.Lead(cmd)}
	// The child is not reaped before Wait, so its /proc entry is there.
	p.Start, _, _ = readProcStat(p.PID)
	go func() {
		p.waitErr = p.lead.Wait()
		close(p.exited)
	}()
	return p, nil
}

// readProcStat returns the start time (field 22) and state (field 3) of pid.
func readProcStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// comm (field 2) may contain spaces and parentheses; it ends at the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 || len(f[0]) == 0 {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return start, f[0][0], nil
}

// alive reports whether p is still running and is still the process we
// started (not a recycled PID, not a zombie).
func (p *desktopProc) alive() bool {
	if p.exited != nil {
		select {
		case <-p.exited:
			return false
		default:
		}
	}
	if p.PID <= 0 {
		return false
	}
	start, state, err := readProcStat(p.PID)
	return err == nil && start == p.Start && state != 'Z' && state != 'X'
}

// signal sends sig to p's process group (p leads it: every desktop process
// is started with Setpgid): our own child's only while it is unreaped, an
// adopted one's after checking p is still ours.
func (p *desktopProc) signal(sig syscall.Signal) {
	if p.lead != nil {
		p.lead.Signal(sig)
		return
	}
	if !p.alive() {
		return
	}
	if err := syscall.Kill(-p.PID, sig); err != nil {
		_ = syscall.Kill(p.PID, sig)
	}
}

// wait reports whether p ended within timeout.
func (p *desktopProc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	if p.exited != nil {
		select {
		case <-p.exited:
			return true
		case <-t.C:
			return false
		}
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for p.alive() {
		select {
		case <-tick.C:
		case <-t.C:
			return !p.alive()
		}
	}
	return true
}

// stopDesktopProcs terminates procs (SIGTERM, then SIGKILL after grace) and
// waits for them. It reports the ones that would not die.
// A namespaced desktop process is bubblewrap, whose child is the init of
// the process's pid namespace: that init is pinned before bubblewrap is
// signalled, and killed and waited for after, since the namespace (and
// whatever the user left in it) is gone only once its init has exited.
func stopDesktopProcs(procs []*desktopProc, grace time.Duration) error {
	var inits []int // pidfds
	for _, p := range procs {
		if p.alive() {
			inits = append(inits, pinChildren(p.PID)...)
		}
	}
	defer func() {
		for _, fd := range inits {
			unix.Close(fd)
		}
	}()
	for _, p := range procs {
		p.signal(syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	var stubborn []*desktopProc
	for _, p := range procs {
		if !p.wait(max(time.Until(deadline), 0)) {
			stubborn = append(stubborn, p)
		}
	}
	var errs []error
	for _, p := range stubborn {
		p.signal(syscall.SIGKILL)
		if !p.wait(2 * time.Second) {
			errs = append(errs, fmt.Errorf("%s (pid %d) survived SIGKILL", p.Name, p.PID))
		}
	}
	for _, fd := range inits {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
		if !waitPidfd(fd, 2*time.Second) {
			errs = append(errs, errors.New("a desktop process's pid namespace survived SIGKILL"))
		}
	}
	return errors.Join(errs...)
}

// pinChildren returns pidfds of pid's children.
func pinChildren(pid int) []int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	if err != nil {
		return nil
	}
	var fds []int
	for _, f := range strings.Fields(string(b)) {
		child, err := strconv.Atoi(f)
		if err != nil {
			continue
		}
		if fd, err := unix.PidfdOpen(child, 0); err == nil {
			fds = append(fds, fd)
		}
	}
	return fds
}

// waitPidfd reports whether the process of pidfd fd exited within timeout.
func waitPidfd(fd int, timeout time.Duration) bool {
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(pfd, int(timeout/time.Millisecond))
		if err == unix.EINTR {
			continue
		}
		return err == nil && n > 0
	}
}

// writeDesktopPids atomically replaces <dir>/pids.
func writeDesktopPids(dir string, rec desktopPids) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, desktopPidsName+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, desktopPidsName))
}

// readDesktopPids reads <dir>/pids; the error wraps fs.ErrNotExist when there
// is none.
func readDesktopPids(dir string) (desktopPids, error) {
	rec := desktopPids{Display: -1}
	b, err := os.ReadFile(filepath.Join(dir, desktopPidsName))
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("parse %s: %w", desktopPidsName, err)
	}
	return rec, nil
}

// lastLogLine returns the last meaningful line of a log file, for errors.
// X servers frame fatal errors with bare "(EE)" lines, which are skipped.
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > 4096 {
		_, _ = f.Seek(-4096, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if line := strings.TrimSpace(lines[i]); line != "" && line != "(EE)" {
			return line
		}
	}
	return ""
}
