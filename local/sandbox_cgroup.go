package local

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A desktop's memory and processes are bounded by the kernel across all
// its processes, in a cgroup of its own under the portal's: cgroup v2
// where the portal's cgroup is delegated to it (memory.max, pids.max,
// memory.oom.group: the whole desktop ends together), else the v1 memory
// and pids controllers (memory.limit_in_bytes, pids.max) on v1 and hybrid
// hosts. Every desktop process starts inside it (v2: clone into the
// cgroup; v1: a shell that moves itself there, then execs), with an
// oom_score_adj of 1000, so that under the host's memory pressure a
// desktop dies before the portal.

// cgroupFS and procSelfCgroup are where the cgroup hierarchies are mounted
// and where the portal's own cgroups are listed (vars: tests use a fake
// tree).
var (
	cgroupFS       = "/sys/fs/cgroup"
	procSelfCgroup = "/proc/self/cgroup"
)

// desktopOOMScoreAdj puts desktops first in line for the OOM killer.
const desktopOOMScoreAdj = 1000

// cgroups is where desktops' cgroups are made: v2, or the v1 memory and
// pids controllers, each a folder the portal may make children in. A
// controller the host does not give the portal is "" and named in
// missing.
type cgroups struct {
	v2           string // the portal's cgroup v2 folder, memory and pids on for children
	memory, pids string // v1: the portal's folders in the memory and pids hierarchies
	missing      []string

	// byLeaf is each member's one desktopCgroup, whatever start asks for
	// it: a crashed desktop's late clean-up and the next start must count
	// the same makes (desktopCgroup.gen), or the clean-up deletes the
	// folder the start has just made.
	mu     sync.Mutex
	byLeaf map[string]*desktopCgroup
}

// detectCgroups finds the portal's own cgroups and which of them it may
// make desktops' cgroups in.
func detectCgroups() *cgroups {
	cg := &cgroups{}
	b, err := os.ReadFile(procSelfCgroup)
	if err != nil {
		cg.missing = []string{"memory", "pids"}
		return cg
	}
	v1 := map[string]string{}
	var v2path string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		id, rest, _ := strings.Cut(sc.Text(), ":")
		ctrls, path, _ := strings.Cut(rest, ":")
		if id == "0" && ctrls == "" {
			v2path = path
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			v1[c] = path
		}
	}
	if _, ok := v1["memory"]; !ok && v2path != "" {
		if dir := filepath.Join(cgroupFS, v2path); cgroupV2Usable(dir) {
			cg.v2 = dir
			return cg
		}
		cg.missing = []string{"memory", "pids"}
		return cg
	}
	for _, c := range []struct {
		name string
		dst  *string
	}{{"memory", &cg.memory}, {"pids", &cg.pids}} {
		path, ok := v1[c.name]
		dir := filepath.Join(cgroupFS, c.name, path)
		if ok && writableDir(dir) {
			*c.dst = dir
		} else {
			cg.missing = append(cg.missing, c.name)
		}
	}
	return cg
}

// cgroupV2Usable reports whether dir is a cgroup v2 folder of the
// portal's whose children may have the memory and pids controllers.
func cgroupV2Usable(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil || !writableDir(dir) {
		return false
	}
	have := strings.Fields(string(b))
	if !contains(have, "memory") || !contains(have, "pids") {
		return false
	}
	on, _ := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
	if contains(strings.Fields(string(on)), "memory") && contains(strings.Fields(string(on)), "pids") {
		return true
	}
	// Fails while the portal's cgroup holds processes (no internal
	// processes in v2): the portal must be given a cgroup to delegate.
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids"), 0) == nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// writableDir reports whether this process may make a folder in dir.
func writableDir(dir string) bool {
	probe, err := os.MkdirTemp(dir, ".corral-probe")
	if err != nil {
		return false
	}
	os.Remove(probe)
	return true
}

// Missing says which kernel limits desktops go without here and why, in
// one line for doctor and the log; "" when none.
func (cg *cgroups) Missing() string {
	if cg == nil || len(cg.missing) == 0 {
		return ""
	}
	return fmt.Sprintf("no %s limit across a desktop's processes: the host gives the portal no cgroup tree of its own for the %s controller (cgroup v2: delegate the portal's cgroup, e.g. systemd Delegate=yes; cgroup v1: run the portal as root); only the per-process rlimits bound them",
		strings.Join(cg.missing, " or "), strings.Join(cg.missing, " and "))
}

// Describe names the kernel limits desktops get, for the log.
func (cg *cgroups) Describe() string {
	switch {
	case cg == nil:
		return "none"
	case cg.v2 != "":
		return "cgroup v2 memory and pids"
	}
	var have []string
	if cg.memory != "" {
		have = append(have, "memory")
	}
	if cg.pids != "" {
		have = append(have, "pids")
	}
	if len(have) == 0 {
		return "none"
	}
	return "cgroup v1 " + strings.Join(have, " and ")
}

// desktopCgroup is one desktop's cgroup (one folder per v1 controller).
type desktopCgroup struct {
	v2           string
	memory, pids string
	limits       Limits
	parents      *cgroups // where it is made (again) by make
	leaf         string
	uid, gid     int
	mu           sync.Mutex // orders make against a late removeAt
	gen          uint64     // counts makes
}

// forDesktop makes (or, for an adopted desktop, finds) the cgroup of the
// member whose folder is dir, with l's memory and process limits,
// writable for uid's moves into it (v1). nil cg, or no controller, gives
// nil. Its name holds the folder's hash: two portals on one host, or two
// data dirs, never share one.
func (cg *cgroups) forDesktop(dir string, l Limits, uid, gid int) (*desktopCgroup, error) {
	if cg == nil || (cg.v2 == "" && cg.memory == "" && cg.pids == "") {
		return nil, nil
	}
	sum := sha256.Sum256([]byte(dir))
	leaf := "corral-desktop-" + filepath.Base(dir) + "-" + hex.EncodeToString(sum[:4])
	cg.mu.Lock()
	d := cg.byLeaf[leaf]
	if d == nil {
		d = &desktopCgroup{parents: cg, leaf: leaf}
		if cg.byLeaf == nil {
			cg.byLeaf = map[string]*desktopCgroup{}
		}
		cg.byLeaf[leaf] = d
	}
	cg.mu.Unlock()
	d.mu.Lock()
	d.limits, d.uid, d.gid = l, uid, gid
	d.mu.Unlock()
	if err := d.make(); err != nil {
		return nil, err
	}
	return d, nil
}

// make creates d's folders with its limits, or finds them. A desktop's
// stop removes them, so each start makes them again (a nil d is no
// cgroup).
func (d *desktopCgroup) make() error {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gen++
	cg, l := d.parents, d.limits
	mk := func(parent string, files map[string]uint64) (string, error) {
		if parent == "" {
			return "", nil
		}
		dir := filepath.Join(parent, d.leaf)
		// An empty one left behind goes, so its counters start afresh; one
		// that holds processes (an adopted desktop's) stays.
		os.Remove(dir)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("cgroup %s: %w", dir, err)
		}
		for file, n := range files {
			if n == 0 {
				continue
			}
			if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatUint(n, 10)), 0); err != nil {
				return "", fmt.Errorf("cgroup %s: %w", filepath.Join(dir, file), err)
			}
		}
		return dir, nil
	}
	var err error
	if cg.v2 != "" {
		d.v2, err = mk(cg.v2, map[string]uint64{"memory.max": l.Memory, "memory.swap.max": swapOff(l.Memory), "pids.max": l.pidsMax(), "memory.oom.group": 1})
		return err
	}
	if d.memory, err = mk(cg.memory, map[string]uint64{"memory.limit_in_bytes": l.Memory}); err != nil {
		return err
	}
	if d.pids, err = mk(cg.pids, map[string]uint64{"pids.max": l.pidsMax()}); err != nil {
		return err
	}
	for _, dir := range []string{d.memory, d.pids} {
		if dir == "" {
			continue
		}
		// The desktop's processes move themselves in; they may write this
		// file only (moving out needs another cgroup's, which they cannot).
		if err := os.Chown(filepath.Join(dir, "cgroup.procs"), d.uid, d.gid); err != nil {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// swapOff is 0 for no limit at all, else 1 byte short of nothing: a
// desktop under a memory limit gets no swap to spill into. (0 itself
// reads as "not set" to forDesktop.)
func swapOff(memory uint64) uint64 {
	if memory == 0 {
		return 0
	}
	return 1
}

// joinArgs returns the command that moves itself into d's v1 cgroups (v2:
// the parent clones it straight into its cgroup) and raises its
// oom_score_adj, then runs argv: with exec, or as its child (see
// wrapArgs).
func (d *desktopCgroup) joinArgs(argv []string, child bool) []string {
	script := "echo " + strconv.Itoa(desktopOOMScoreAdj) + " >/proc/self/oom_score_adj || exit 125"
	var files []string
	for _, dir := range []string{d.memory, d.pids} {
		if dir != "" {
			files = append(files, filepath.Join(dir, "cgroup.procs"))
		}
	}
	for i := range files {
		script += "; echo $$ >\"$" + strconv.Itoa(i+1) + "\" || exit 125"
	}
	script += "; shift " + strconv.Itoa(len(files)) + "; " + runArgv(child)
	return append(append([]string{"/bin/sh", "-c", script, "sh"}, files...), argv...)
}

// runArgv is the shell's command that runs its arguments: exec, or a
// child whose exit status is the shell's.
func runArgv(child bool) string {
	if child {
		return "\"$@\""
	}
	return "exec \"$@\""
}

// wrapArgs returns the command that runs argv as the child of a shell:
// bubblewrap's --die-with-parent then ties a desktop process's namespaces
// to that shell (the PID the portal records and signals), not to the
// portal, which desktops outlive.
func wrapArgs(argv []string) []string {
	return append([]string{"/bin/sh", "-c", runArgv(true), "sh"}, argv...)
}

// limitHit says which limit of d the kernel enforced by ending or
// refusing a process, or "".
func (d *desktopCgroup) limitHit() string {
	if d == nil {
		return ""
	}
	mem := fmt.Sprintf("memory limit (%d MiB) reached: the kernel ended a process of the desktop", d.limits.Memory>>20)
	pids := fmt.Sprintf("process limit (%d) reached: the kernel refused the desktop more processes", d.limits.pidsMax())
	if d.v2 != "" {
		if eventCount(filepath.Join(d.v2, "memory.events"), "oom_kill") > 0 {
			return mem
		}
		if eventCount(filepath.Join(d.v2, "pids.events"), "max") > 0 {
			return pids
		}
		return ""
	}
	if d.memory != "" && eventCount(filepath.Join(d.memory, "memory.oom_control"), "oom_kill") > 0 {
		return mem
	}
	if d.pids != "" && eventCount(filepath.Join(d.pids, "pids.events"), "max") > 0 {
		return pids
	}
	return ""
}

// eventCount reads the counter key of a flat keyed cgroup file.
func eventCount(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove deletes d's cgroups once its processes are gone.
func (d *desktopCgroup) remove() {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.removeLocked()
}

// generation is the count of d's makes so far (0 for no cgroup).
func (d *desktopCgroup) generation() uint64 {
	if d == nil {
		return 0
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.gen
}

// removeAt is remove unless d was made again since generation gen: a
// crashed desktop's late clean-up never takes the cgroup of the start
// that followed it.
func (d *desktopCgroup) removeAt(gen uint64) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.gen == gen {
		d.removeLocked()
	}
}

// removeLocked is remove with d.mu held.
func (d *desktopCgroup) removeLocked() {
	for _, dir := range []string{d.v2, d.memory, d.pids} {
		if dir == "" {
			continue
		}
		// A cgroup folder goes with rmdir, its files with it, once the
		// last of its processes has exited (killed ones may take a moment).
		for range 20 {
			if err := os.Remove(dir); err == nil || !errors.Is(err, syscall.EBUSY) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}
