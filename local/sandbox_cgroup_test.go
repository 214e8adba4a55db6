package local

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeCgroups points detection at a fake tree under a temp dir, with
// /proc/self/cgroup saying self.
func fakeCgroups(t *testing.T, self string) string {
	t.Helper()
	root := t.TempDir()
	os.WriteFile(filepath.Join(root, "self"), []byte(self), 0o644)
	fs, proc := cgroupFS, procSelfCgroup
	cgroupFS, procSelfCgroup = filepath.Join(root, "fs"), filepath.Join(root, "self")
	t.Cleanup(func() { cgroupFS, procSelfCgroup = fs, proc })
	return filepath.Join(root, "fs")
}

// TestDetectCgroups forces every shape of host: v1 with both controllers
// writable (this CI host), v1 without a pids tree, v2 delegated, v2 not
// delegated, and none at all; what is missing is said in one line.
func TestDetectCgroups(t *testing.T) {
	t.Run("v1", func(t *testing.T) {
		fs := fakeCgroups(t, "8:pids:/\n4:memory:/process_api/x\n0::/\n")
		os.MkdirAll(filepath.Join(fs, "memory", "process_api", "x"), 0o755)
		os.MkdirAll(filepath.Join(fs, "pids"), 0o755)
		cg := detectCgroups()
		if cg.Missing() != "" || cg.memory != filepath.Join(fs, "memory", "process_api", "x") || cg.pids != filepath.Join(fs, "pids") {
			t.Errorf("detect = %+v; want both v1 controllers", cg)
		}
		if got := cg.Describe(); got != "cgroup v1 memory and pids" {
			t.Errorf("Describe = %q", got)
		}
	})
	t.Run("v1-no-pids", func(t *testing.T) {
		fs := fakeCgroups(t, "4:memory:/\n0::/\n")
		os.MkdirAll(filepath.Join(fs, "memory"), 0o755)
		cg := detectCgroups()
		if m := cg.Missing(); !strings.Contains(m, "no pids limit") || strings.Contains(m, "\n") {
			t.Errorf("Missing = %q; want the pids limit named", m)
		}
	})
	t.Run("v2-delegated", func(t *testing.T) {
		fs := fakeCgroups(t, "0::/portal.service\n")
		dir := filepath.Join(fs, "portal.service")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu memory pids\n"), 0o644)
		os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("memory pids\n"), 0o644)
		if cg := detectCgroups(); cg.v2 != dir || cg.Missing() != "" {
			t.Errorf("detect = %+v; want v2 at %s", cg, dir)
		}
	})
	t.Run("v2-no-memory", func(t *testing.T) {
		fs := fakeCgroups(t, "0::/user.slice\n")
		dir := filepath.Join(fs, "user.slice")
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "cgroup.controllers"), []byte("cpu pids\n"), 0o644)
		if m := detectCgroups().Missing(); !strings.Contains(m, "no memory or pids limit") || !strings.Contains(m, "Delegate=yes") {
			t.Errorf("Missing = %q; want both named, and how to delegate", m)
		}
	})
	t.Run("none", func(t *testing.T) {
		fakeCgroups(t, "0::/\n")
		if m := detectCgroups().Missing(); m == "" {
			t.Error("no cgroup tree, and nothing said missing")
		}
	})
}

// TestSandboxedDesktop_MemoryBomb runs a memory bomb in a desktop under a
// 200 MiB limit on this host's real cgroups: the kernel stops it, and the
// desktop ends saying which limit, while another desktop runs on.
func TestSandboxedDesktop_MemoryBomb(t *testing.T) {
	s := MustSandbox(t, "202100-202199", Limits{NProc: 300, Memory: 200 << 20})
	if m := s.MissingLimits(); m != "" {
		t.Skip(m)
	}
	d := MustStartDesktop(t, MustSandboxedSpec(t, s, "mb"))
	other := MustStartDesktop(t, MustSandboxedSpec(t, s, "ok"))
	for _, p := range d.procs {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/oom_score_adj"); strings.TrimSpace(string(b)) != "1000" {
			t.Errorf("%s has oom_score_adj %q; want 1000 (desktops die before the portal)", p.Name, b)
		}
	}
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("cat /proc/self/oom_score_adj; python3 -c 'b=[]\nwhile True: b.append(bytearray(1<<24))' || perl -e '$x .= \"x\" x (1<<24) while 1'\r"))
	select {
	case <-d.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the desktop still runs after its memory bomb")
	}
	if err := d.Err(); err == nil || !strings.Contains(err.Error(), "memory limit (200 MiB) reached") {
		t.Errorf("Err = %v; want the memory limit named", err)
	}
	if w, _, _ := rfbHandshake(t, other.VNCSocket()); w != 1280 {
		t.Errorf("the other desktop's VNC: width %d", w)
	}
}

// TestCgroupOneObjectPerMember: every start of a member gets the same
// desktopCgroup, so a crashed desktop's late clean-up (removeAt with the
// generation it saw) knows that the next start made the folder again and
// leaves it. With one object per start, CI saw the clean-up delete the
// folder the restart had just made ("cgroup.procs: Directory nonexistent").
func TestCgroupOneObjectPerMember(t *testing.T) {
	parent := t.TempDir()
	cg := &cgroups{memory: parent}
	dir := filepath.Join(t.TempDir(), "demo-2")
	// A plain folder plays the kernel's: it has cgroup.procs, which make
	// hands to the member's uid.
	sum := sha256.Sum256([]byte(dir))
	leaf := filepath.Join(parent, "corral-desktop-demo-2-"+hex.EncodeToString(sum[:4]))
	if err := os.Mkdir(leaf, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(leaf, "cgroup.procs"), nil, 0o644)
	crashed, err := cg.forDesktop(dir, Limits{Memory: 1 << 30}, 80001, 80001)
	if err != nil {
		t.Fatal(err)
	}
	gen := crashed.generation() // what the crashed desktop's clean-up remembers
	restart, err := cg.forDesktop(dir, Limits{Memory: 2 << 30}, 80001, 80001)
	if err != nil {
		t.Fatal(err)
	}
	if restart != crashed {
		t.Fatal("a second start of the member got a cgroup object of its own")
	}
	crashed.removeAt(gen)
	if _, err := os.Stat(filepath.Join(parent, crashed.leaf)); err != nil {
		t.Errorf("the late clean-up removed the restart's cgroup: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(parent, crashed.leaf, "memory.limit_in_bytes")); strings.TrimSpace(string(b)) != strconv.Itoa(2<<30) {
		t.Errorf("the restart's memory limit is %q; want the new limit %d", b, 2<<30)
	}
}
