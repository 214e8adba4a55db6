package local_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestAttack_UploadOutsideTheDesktopsMemory uploads 400 MB into a desktop
// whose home is a tmpfs and whose memory is bounded at 768 MiB: the pages
// must count against the desktop's memory cgroup, not the portal's (before
// the fix the desktop's stayed flat and the portal's grew by 400 MB), and
// the portal's RSS stays flat. A second 400 MB does not fit: it is refused
// as a full memory before the kernel's OOM killer would end the desktop,
// which keeps running with the first file, and nothing partial is left.
func TestAttack_UploadOutsideTheDesktopsMemory(t *testing.T) {
	const mib = 1 << 20
	b, ref, _, sandbox := mustFilesMemberWith(t, "1200M", local.Limits{Memory: 768 * mib})
	desk, portal, v1 := mustMemoryCgroups(t, sandbox, "f-1")
	portalOwn := func() int64 { // the portal's cgroup's own tmpfs pages
		if v1 {
			return memStat(t, portal, "shmem")
		}
		return memStat(t, portal, "shmem") - memStat(t, desk, "shmem")
	}
	ctx := context.Background()
	d0, p0, rss0 := memStat(t, desk, "shmem"), portalOwn(), statusKB(t, "VmRSS")
	got, err := b.Upload(ctx, ref, "big.bin", io.LimitReader(zeros{}, 400*mib), 1<<30, 1<<30)
	if err != nil || got.Size != 400*mib {
		t.Fatalf("the 400 MB upload: %+v %v", got, err)
	}
	d1, p1, rss1 := memStat(t, desk, "shmem"), portalOwn(), statusKB(t, "VmRSS")
	t.Logf("400 MB upload into the desktop: its cgroup's tmpfs pages %+d MiB, the portal's %+d MiB; the portal's RSS %d -> %d MiB", (d1-d0)/mib, (p1-p0)/mib, rss0>>10, rss1>>10)
	if d1-d0 < 390*mib {
		t.Errorf("attack upload-outside-the-desktop's-memory SUCCEEDED: the desktop's cgroup holds %+d MiB more tmpfs pages after a 400 MB upload; want >= 390", (d1-d0)/mib)
	}
	if p1-p0 > 40*mib {
		t.Errorf("the portal's cgroup holds %+d MiB more tmpfs pages after a 400 MB upload into a desktop; want < 40", (p1-p0)/mib)
	}
	if rss1-rss0 > 64<<10 {
		t.Errorf("the portal's RSS grew by %d MiB during a 400 MB upload; want < 64", (rss1-rss0)>>10)
	}

	_, err = b.Upload(ctx, ref, "again.bin", io.LimitReader(zeros{}, 400*mib), 1<<30, 1<<30)
	if codeOf(err) != vdi.EFull || !strings.Contains(err.Error(), "memory is full") {
		t.Errorf("a second 400 MB upload into 768 MiB: %v; want refused for the desktop's memory", err)
	}
	if kills := memStat(t, desk, "oom_kill"); kills != 0 {
		t.Errorf("the kernel killed %d processes of the desktop for memory; want the upload refused before", kills)
	}
	if m, err := b.Member(ctx, ref); err != nil || m.Power != vdi.PowerRunning {
		t.Errorf("the desktop after the refused upload: %+v %v; want running", m, err)
	}
	if out := shell(t, b, ref, `ls -A ~/Uploads | tr '\n' ' '`); !strings.Contains(out, "big.bin") || strings.Contains(out, ".part") || strings.Contains(out, "again") {
		t.Errorf("~/Uploads after the refusal: %q; want big.bin and nothing partial", out)
	}
	if d2 := memStat(t, desk, "shmem"); d2 > d1+40*mib {
		t.Errorf("the desktop holds %d MiB of tmpfs pages after the refused upload; want its first file's %d back", d2/mib, d1/mib)
	}
}

// zeros reads as an endless run of zero bytes.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// mustMemoryCgroups returns the memory cgroup folders of member's desktop
// in sandbox and of the portal (this test), and whether they are cgroup
// v1. It skips the test where sandbox gives desktops no memory cgroup
// here, saying why, and fails it where sandbox should have made one.
func mustMemoryCgroups(t *testing.T, sandbox *local.Sandbox, member string) (desk, portal string, v1 bool) {
	t.Helper()
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var v2 string
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		switch {
		case len(parts) < 3:
		case parts[1] == "":
			v2 = filepath.Join("/sys/fs/cgroup", parts[2])
		case strings.Contains(","+parts[1]+",", ",memory,"):
			portal, v1 = filepath.Join("/sys/fs/cgroup/memory", parts[2]), true
		}
	}
	if !v1 {
		portal = v2
	}
	// The desktop's own has its processes: a portal killed on this
	// machine before leaves its desktops' cgroups behind, empty, as the
	// one made here does.
	if left := filepath.Join(portal, "corral-desktop-"+member+"-leftover"); os.Mkdir(left, 0o755) == nil {
		t.Cleanup(func() { os.Remove(left) })
	}
	all, _ := filepath.Glob(filepath.Join(portal, "corral-desktop-"+member+"-*"))
	var found []string
	for _, cg := range all {
		if procs, err := os.ReadFile(filepath.Join(cg, "cgroup.procs")); err == nil && len(bytes.TrimSpace(procs)) > 0 {
			found = append(found, cg)
		}
	}
	if len(found) != 1 {
		if !strings.Contains(sandbox.KernelLimits(), "memory") {
			t.Skipf("this host gives desktops no memory cgroup: %s", sandbox.MissingLimits())
		}
		t.Fatalf("no one memory cgroup of the desktop under %s (%v with processes, of %v), though desktops get a %s here", portal, found, all, sandbox.KernelLimits())
	}
	return found[0], portal, v1
}

// memStat reads key of a cgroup's memory.stat, or (oom_kill) of its
// memory.events (v2) or memory.oom_control (v1).
func memStat(t *testing.T, dir, key string) int64 {
	t.Helper()
	file := "memory.stat"
	if key == "oom_kill" {
		file = "memory.events"
		if _, err := os.Stat(filepath.Join(dir, file)); err != nil {
			file = "memory.oom_control"
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	t.Fatalf("%s has no %s", filepath.Join(dir, file), key)
	return 0
}

// statusKB reads a kB field of /proc/self/status.
func statusKB(t *testing.T, key string) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("/proc/self/status has no %s", key)
	return 0
}
