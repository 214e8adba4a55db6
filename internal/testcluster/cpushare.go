package testcluster

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// TEST-ONLY: a fixed CPU share for measurements on a shared machine (the
// soak's morning storm): processes moved into a CPU cgroup of their own
// that may use at most a fixed number of cores and outweighs every other
// process on the machine while it wants them, so that other builds and
// tests neither slow them down nor let them run faster than the share.

// Weights of a share's cgroup: the largest each cgroup version
// allows (v1 cpu.shares, v2 cpu.weight); a process of its own has 1024
// (v1) or 100 (v2).
const (
	cpuSharesMax = 262144
	cpuWeightMax = 10000
)

// cfsPeriod is the CFS period of the share's quota, in microseconds.
const cfsPeriod = 100000

// CPUShare describes a share's cgroup, for a report.
type CPUShare struct {
	// Dir is the cgroup's folder.
	Dir string
	// Cores is the most its processes may use together.
	Cores float64
	// Weight is the cgroup's weight against a process of its own (1.0).
	Weight float64
}

// String says the share in words.
func (s CPUShare) String() string {
	return fmt.Sprintf("%s: at most %.2g cores, weight %.0f× a process's", s.Dir, s.Cores, s.Weight)
}

// ControlPlanePIDs returns the process ids of the apiserver and etcd.
func (c *Cluster) ControlPlanePIDs() ([]int, error) {
	var pids []int
	for _, find := range []func() (int, error){c.APIServerPID, c.EtcdPID} {
		pid, err := find()
		if err != nil {
			return nil, err
		}
		pids = append(pids, pid)
	}
	return pids, nil
}

// FixCPU moves pids (each with all its threads; their children started
// later are born inside) into a new cgroup with at most cores CPUs and the
// largest weight, and returns how, and the function that moves them back
// and removes the cgroup. It needs root and a cpu controller (cgroup v2's,
// else v1's).
func FixCPU(cores float64, pids ...int) (CPUShare, func(), error) {
	if cores <= 0 {
		return CPUShare{}, nil, fmt.Errorf("testcluster: a CPU share of %g cores: want more than 0", cores)
	}
	quota := int(cores * cfsPeriod)
	name := "corral-share-" + strings.ToLower(rand.Text()[:8])
	var share CPUShare
	var root string
	var settings [][2]string
	if ctl, err := os.ReadFile("/sys/fs/cgroup/cgroup.subtree_control"); err == nil && strings.Contains(" "+string(ctl), " cpu") {
		// cgroup v2 with cpu delegated to the root's children.
		root = "/sys/fs/cgroup"
		settings = [][2]string{{"cpu.max", fmt.Sprintf("%d %d", quota, cfsPeriod)}, {"cpu.weight", strconv.Itoa(cpuWeightMax)}}
		share.Weight = cpuWeightMax / 100
	} else if _, err := os.Stat("/sys/fs/cgroup/cpu/cpu.shares"); err == nil {
		root = "/sys/fs/cgroup/cpu"
		settings = [][2]string{{"cpu.cfs_period_us", strconv.Itoa(cfsPeriod)}, {"cpu.cfs_quota_us", strconv.Itoa(quota)}, {"cpu.shares", strconv.Itoa(cpuSharesMax)}}
		share.Weight = cpuSharesMax / 1024
	} else {
		return CPUShare{}, nil, fmt.Errorf("testcluster: no cgroup cpu controller here (neither /sys/fs/cgroup/cgroup.subtree_control with cpu nor /sys/fs/cgroup/cpu): a CPU share cannot be fixed")
	}
	dir := filepath.Join(root, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return CPUShare{}, nil, fmt.Errorf("testcluster: make a cgroup for a CPU share (root needed): %w", err)
	}
	undo := func() {
		// Every process in it, the children born inside included.
		buf, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		for _, pid := range strings.Fields(string(buf)) {
			os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(pid), 0)
		}
		os.Remove(dir)
	}
	for _, s := range settings {
		if err := os.WriteFile(filepath.Join(dir, s[0]), []byte(s[1]), 0); err != nil {
			undo()
			return CPUShare{}, nil, fmt.Errorf("testcluster: set %s of a CPU share's cgroup: %w", s[0], err)
		}
	}
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			undo()
			return CPUShare{}, nil, fmt.Errorf("testcluster: move process %d into a CPU share's cgroup: %w", pid, err)
		}
	}
	share.Dir, share.Cores = dir, cores
	return share, undo, nil
}
