package local

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// TestAdopt_RecycledPID: a portal's records name a desktop's and a
// guest's processes by PID and start time. Where a recorded process is
// gone and the kernel has handed its PID to another (forced here: the
// records name a bystander's PID with start times not its own, as they
// read once the PID has come round again), a restarted portal neither
// adopts nor signals it: the desktop and the guest are not running, and
// the bystander lives on.
func TestAdopt_RecycledPID(t *testing.T) {
	t.Run("Desktop", func(t *testing.T) {
		pid, start := mustBystander(t)
		spec, err := MustDesktopSpec(t, "recycled").withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(spec.State, 0o700); err != nil {
			t.Fatal(err)
		}
		recycled := desktopPids{Display: 99, Procs: []*desktopProc{{Name: desktopXvnc, PID: pid, Start: start - 1}, {Name: "openbox", PID: pid, Start: start + 1}}}
		if err := writeDesktopPids(spec.State, recycled); err != nil {
			t.Fatal(err)
		}
		if d, err := AdoptDesktop(spec, testLogger(t)); !errors.Is(err, ErrNotRunning) {
			t.Errorf("AdoptDesktop of a desktop whose PIDs another process has = %v, %v; want ErrNotRunning", d, err)
		}
		if err := writeDesktopPids(spec.State, recycled); err != nil {
			t.Fatal(err)
		}
		if err := killRecordedDesktop(spec.State, testLogger(t)); err != nil {
			t.Errorf("killRecordedDesktop of a desktop whose PIDs another process has: %v", err)
		}
	})

	t.Run("VM", func(t *testing.T) {
		pid, start := mustBystander(t)
		cfg := vmBoot{name: "recycled-vm", dir: t.TempDir(), log: testLogger(t)}
		b, err := json.Marshal(vmRecord{Proc: &desktopProc{Name: "qemu", PID: pid, Start: start - 1}, VNC: "127.0.0.1:1", Serial: "127.0.0.1:2"})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(cfg.stateDir(), vmRecordName), b, 0o600); err != nil {
			t.Fatal(err)
		}
		v, err := adoptVM(cfg)
		if !errors.Is(err, ErrNotRunning) {
			t.Errorf("adoptVM of a guest whose PID another process has: adopted %v, %v; want ErrNotRunning", v != nil, err)
		}
		if err == nil {
			close(v.poll) // its watch of the bystander
		}
	})
}

// mustBystander starts a process that is none of the portal's and returns
// its PID and start time. When the test ends it checks that nothing
// signalled it: whatever signal reached it first is the one it ends by,
// and the test's own SIGUSR1 comes last.
func mustBystander(t *testing.T) (pid int, start uint64) {
	t.Helper()
	cmd := exec.Command("sleep", "600")
	// It leads its group, as every desktop process does: a signal meant
	// for a recorded process's group would reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid = cmd.Process.Pid
	start, _, err := readProcStat(pid)
	if err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cmd.Process.Signal(syscall.SIGUSR1); err != nil {
			t.Errorf("the bystander (pid %d): %v; want it alive", pid, err)
		}
		cmd.Wait()
		if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
			t.Errorf("the bystander (pid %d) ended by %v; want the test's SIGUSR1: the portal signalled a process that was not its own", pid, cmd.ProcessState)
		}
	})
	return pid, start
}
