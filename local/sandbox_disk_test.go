package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSandboxedDesktop_DiskBound fills an ephemeral desktop's home and
// /tmp: each write stops at the 8 MiB bound, and the bounds come off when
// the member is wiped. A process of the desktop that writes to its stdout
// without end (as anything started from its window manager's menu may)
// fills the member's state folder, not the portal's disk.
func TestSandboxedDesktop_DiskBound(t *testing.T) {
	s := MustSandbox(t, "202300-202399", Limits{NProc: 300, Disk: 8 << 20})
	spec := MustSandboxedSpec(t, s, "disk")
	member := filepath.Dir(spec.Dir)
	t.Cleanup(func() { unmountMember(member) })
	spec.Ephemeral = true
	d := MustStartDesktop(t, spec)
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("for f in ~/fill /tmp/fill; do dd if=/dev/zero of=$f bs=1M count=64 2>&1 | grep -c 'No space left'; du -m $f; done; echo DONE-$((40+2))\r"))
	out := readUntil(t, term, "DONE-42")
	if strings.Count(out, "1\r\n8\t") != 2 {
		t.Errorf("filling home and /tmp said %q; want both refused at the bound", out)
	}
	flood, err := startDesktopProc("flood", spec.State, "/bin/dd", []string{"if=/dev/zero", "bs=1M", "count=64"}, nil, spec.Home, nil, spec.User)
	if err != nil {
		t.Fatal(err)
	}
	if !flood.wait(time.Minute) {
		t.Fatal("a desktop process writing 64 MiB to its stdout did not end within a minute")
	}
	if fi, err := os.Stat(filepath.Join(spec.State, "flood.log")); err != nil || fi.Size() > stateBound {
		t.Errorf("attack log-fill: a desktop process's stdout log is %v (%v); want at most the state folder's %d bytes", fi.Size(), err, stateBound)
	}
	for _, dir := range []string{spec.Home, filepath.Join(member, memberTmpName), spec.State} {
		if !isMountpoint(dir) {
			t.Errorf("%s has no disk bound mounted", dir)
		}
	}
	d.Stop()
	if err := unmountMember(member); err != nil {
		t.Fatal(err)
	}
	if isMountpoint(spec.Home) || isMountpoint(spec.State) {
		t.Error("the home's or the state folder's bound survived unmountMember")
	}
}

// TestAttack_SandboxRootFill fills what of a desktop's mount namespace is
// not its home or /tmp: the root itself (bubblewrap's tmpfs), /run, /var,
// /dev/shm, /var/tmp and /run/desktop (the member's run folder, on the
// data disk). The root is read-only; /run, /var and /dev/shm are one
// bound for all the desktop's processes: what one process wrote in /run
// leaves another none in /var or /dev/shm (before, each process had a
// bound of its own for /run and /var, and /dev/shm none but memory). The
// run folder and /var/tmp stop at bounds of their own.
func TestAttack_SandboxRootFill(t *testing.T) {
	s := MustSandbox(t, "202300-202399", Limits{NProc: 300, Disk: 8 << 20})
	spec := MustSandboxedSpec(t, s, "rootfill")
	member := filepath.Dir(spec.Dir)
	t.Cleanup(func() { unmountMember(member) })
	d := MustStartDesktop(t, spec)
	fill := func(files string) string {
		term, err := d.StartTerminal() // a process (bubblewrap) of its own
		if err != nil {
			t.Fatal(err)
		}
		defer term.Close()
		term.Write([]byte("for f in " + files + "; do dd if=/dev/zero of=$f bs=1M count=64 2>/dev/null; echo \"FILLED $f $(du -m $f 2>/dev/null | cut -f1)\"; done; echo DONE-$((40+2))\r"))
		return readUntil(t, term, "DONE-42")
	}
	out := fill("/fill /run/fill /var/tmp/fill /run/desktop/fill") + fill("/var/fill /dev/shm/fill")
	for _, want := range []string{"FILLED /fill \r", "FILLED /run/fill 8\r", "FILLED /var/tmp/fill 8\r", "FILLED /run/desktop/fill 8\r", "FILLED /var/fill 0\r", "FILLED /dev/shm/fill 0\r"} {
		if !strings.Contains(out, want) {
			t.Errorf("attack root-fill: the terminals said %q; want %q (nothing written to the root; /run, /var and /dev/shm one 8 MiB bound together, /var/tmp and the run folder 8 MiB each)", out, want)
		}
	}
}
