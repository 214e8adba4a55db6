package local

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
)

// TestLeader_NoSignalOnceReaped gives a reaped leader's PID to another
// process group (the kernel's ns_last_pid chooses the next PID) and checks
// that signalling the leader leaves that group alone: kill(-pid) after the
// reap would kill it.
func TestLeader_NoSignalOnceReaped(t *testing.T) {
	start := func(name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := lead(start("true"))
	if err := first.wait(); err != nil {
		t.Fatalf("true: %v", err)
	}
	pid := first.cmd.Process.Pid

	var other *exec.Cmd
	for try := 0; try < 100 && other == nil; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("cannot choose the next PID (needs root): %v", err)
		}
		cmd := start("sleep", "60")
		if cmd.Process.Pid == pid {
			other = cmd
			break
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	if other == nil {
		t.Fatalf("no process was given PID %d again in 100 tries (another process took it each time)", pid)
	}

	first.signal(syscall.SIGKILL)
	// Ended by the test's SIGTERM, unless the SIGKILL above reached it
	// first (a fatal signal decides the exit status when it is sent).
	other.Process.Signal(syscall.SIGTERM)
	err := other.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("sleep: %v", err)
	}
	if sig := exit.Sys().(syscall.WaitStatus).Signal(); sig != syscall.SIGTERM {
		t.Fatalf("the process given the reaped leader's PID %d ended by %v: the leader's signal reached a stranger's group", pid, sig)
	}
}

// TestLeader_SignalsItsGroup checks a living leader's group gets the
// signal.
func TestLeader_SignalsItsGroup(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	l := lead(cmd)
	l.signal(syscall.SIGKILL)
	err := l.wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("sleep ended with %v, want killed by the leader's SIGKILL", err)
	}
}
