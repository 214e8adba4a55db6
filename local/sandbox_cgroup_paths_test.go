package local

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testmount"
)

// TestSandboxedDesktop_NoCgroupTree forces a host that gives the portal
// no cgroup tree: desktops still start, run as their uids with their
// rlimits, and MissingLimits (doctor's and the log's line) names both
// missing limits.
func TestSandboxedDesktop_NoCgroupTree(t *testing.T) {
	fakeCgroups(t, "0::/\n")
	s := MustSandbox(t, "202700-202799", Limits{NProc: 300, Memory: 200 << 20})
	if m := s.MissingLimits(); !strings.Contains(m, "no memory or pids limit") {
		t.Errorf("MissingLimits() = %q; want memory and pids named", m)
	}
	if got := s.KernelLimits(); got != "none" {
		t.Errorf("KernelLimits() = %q; want none", got)
	}
	d := MustStartDesktop(t, MustSandboxedSpec(t, s, "nocg"))
	if w, _, _ := rfbHandshake(t, d.VNCSocket()); w != 1280 {
		t.Errorf("a desktop without cgroups: VNC width %d; want it running", w)
	}
	if d.spec.User.cg != nil {
		t.Errorf("a desktop got a cgroup %+v on a host without a tree", d.spec.User.cg)
	}
}

// TestDetectCgroups_PrivateV2Mount points detection at a real cgroup2
// filesystem mounted for the test: on a hybrid host (this CI machine) the
// v1 hierarchies hold memory and pids, so v2 offers neither and both are
// named missing; on a host whose v2 has them, a child of the mount is
// used.
func TestDetectCgroups_PrivateV2Mount(t *testing.T) {
	root := t.TempDir()
	mnt := filepath.Join(root, "fs")
	os.Mkdir(mnt, 0o755)
	testmount.Mount(t, "cgroup2", mnt, "cgroup2", "")
	leaf := "corral-test-" + filepath.Base(root)
	if err := os.Mkdir(filepath.Join(mnt, leaf), 0o755); err != nil {
		t.Fatalf("a cgroup in the cgroup2 mount: %v", err)
	}
	t.Cleanup(func() { os.Remove(filepath.Join(mnt, leaf)) })
	os.WriteFile(filepath.Join(root, "self"), []byte("0::/"+leaf+"\n"), 0o644)
	fs, proc := cgroupFS, procSelfCgroup
	cgroupFS, procSelfCgroup = mnt, filepath.Join(root, "self")
	t.Cleanup(func() { cgroupFS, procSelfCgroup = fs, proc })

	have, _ := os.ReadFile(filepath.Join(mnt, "cgroup.controllers"))
	cg := detectCgroups()
	if f := strings.Fields(string(have)); contains(f, "memory") && contains(f, "pids") {
		if cg.v2 != filepath.Join(mnt, leaf) || cg.Missing() != "" {
			t.Errorf("detect = %+v with v2 controllers %q; want v2 at the test's cgroup", cg, have)
		}
		return
	}
	if m := cg.Missing(); !strings.Contains(m, "no memory or pids limit") || !strings.Contains(m, "Delegate=yes") {
		t.Errorf("Missing() = %q with v2 controllers %q; want memory and pids named, and how to delegate", m, have)
	}
}
