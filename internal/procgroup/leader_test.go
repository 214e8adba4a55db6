package procgroup

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestLeader_NoSignalOnceReaped gives a reaped leader's PID to another
// process group and checks that signalling the leader leaves that group
// alone: kill(-pid) after the reap would kill it. It runs again in a PID
// namespace of its own (root), where it alone makes processes and sets the
// next PID (ns_last_pid): done on the host's, that would hand recently
// freed PIDs out again to every process on the machine, and any stale
// kill anywhere would hit.
func TestLeader_NoSignalOnceReaped(t *testing.T) {
	if os.Getenv("CORRAL_TEST_PIDNS") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestLeader_NoSignalOnceReaped$", "-test.v")
		cmd.Env = append(os.Environ(), "CORRAL_TEST_PIDNS=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
		out, err := cmd.CombinedOutput()
		if err != nil && os.Geteuid() != 0 {
			t.Skipf("a PID namespace needs root: %v", err)
		}
		if err != nil || !strings.Contains(string(out), "--- PASS: TestLeader_NoSignalOnceReaped") {
			t.Fatalf("in a PID namespace of its own: %v\n%s", err, out)
		}
		return
	}
	start := func(name string, args ...string) *exec.Cmd {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	first := Lead(start("true"))
	if err := first.Wait(); err != nil {
		t.Fatalf("true: %v", err)
	}
	pid := first.cmd.Process.Pid
	// The runtime's threads take PIDs too: ask until the sleep has it.
	var other *exec.Cmd
	for try := 0; try < 100 && other == nil; try++ {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Fatalf("choose the next PID: %v", err)
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
		t.Fatalf("no process was given PID %d again in 100 tries", pid)
	}

	first.Signal(syscall.SIGKILL)
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
	l := Lead(cmd)
	l.Signal(syscall.SIGKILL)
	err := l.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("sleep ended with %v, want killed by the leader's SIGKILL", err)
	}
}
