package soak

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// Quiet parts on a shared machine: a CPU share is a cgroup of at most N
// cores whose weight is above every other process's
// (testcluster.FixCPU), so other engineers' builds neither slow its
// processes down nor leave them more than N cores.
//   - SOAK_CONTROL_PLANE_CPU=N: the storm cluster's apiserver and etcd.
//   - SOAK_CPU=N: the whole soak (this test process, its clients and
//     stand-ins, and every process it starts: portals, apiserver, etcd;
//     the control plane's own share, when also set, takes those two).
// Unset, nothing is moved.

// soakCgroup is the soak's share's cgroup folder, "" when SOAK_CPU is unset.
var soakCgroup string

// fixSoakCPU puts the soak in a CPU share as SOAK_CPU asks.
func fixSoakCPU(t *testing.T, r *report) {
	if cores, ok := cpuShareAsked(r, "soak", "SOAK_CPU"); ok {
		soakCgroup = share(t, r, "soak", "the soak and all it starts", cores, os.Getpid())
	}
}

// quietControlPlane fixes e's control plane's CPU as SOAK_CONTROL_PLANE_CPU
// asks and returns the cgroup's folder ("" when not asked or it failed,
// which it reports).
func quietControlPlane(t *testing.T, r *report, e *kubeEnv, area string) string {
	cores, ok := cpuShareAsked(r, area, "SOAK_CONTROL_PLANE_CPU")
	if !ok {
		return ""
	}
	pids, err := e.cluster.ControlPlanePIDs()
	if err != nil {
		r.add(area, "CPU share fixed", false, "apiserver and etcd found", "%v", err)
		return ""
	}
	return share(t, r, area, "apiserver and etcd", cores, pids...)
}

// cpuShareAsked reads the cores the variable env asks for.
func cpuShareAsked(r *report, area, env string) (float64, bool) {
	v := os.Getenv(env)
	if v == "" {
		return 0, false
	}
	cores, err := strconv.ParseFloat(v, 64)
	if err != nil {
		r.add(area, "CPU share fixed", false, env+" a number of cores", "%q: %v", v, err)
		return 0, false
	}
	return cores, true
}

// share moves pids (what) into a CPU share of cores until t ends and
// returns its cgroup's folder, "" when it failed (reported).
func share(t *testing.T, r *report, area, what string, cores float64, pids ...int) string {
	s, undo, err := testcluster.FixCPU(cores, pids...)
	if err != nil {
		r.add(area, "CPU share fixed", false, what+" moved", "%v", err)
		return ""
	}
	t.Cleanup(undo)
	r.note("%s: %s in %s", area, what, s)
	return s.Dir
}

// loadWatch samples the machine's load average and CPU time every second,
// and the control plane cgroup's (when there is one), until stop.
type loadWatch struct {
	cgroup string
	done   chan struct{}
	wg     sync.WaitGroup

	mu         sync.Mutex
	lo, hi     float64       // 1-minute load average seen
	busy, all  uint64        // machine CPU ticks
	pids       []int         // the apiserver's and etcd's
	cpUsage    time.Duration // their CPU time at the start
	portals    []int         // the replicas'
	portalCPU  time.Duration // their CPU time at the start; at stop, what they used
	throttled0 uint64        // the cgroup's throttled ns at the start
	soak0      uint64        // the soak's share's
	started    time.Time
}

// watchLoad starts a loadWatch of e's control plane; cgroup is its
// cgroup's folder or "".
func watchLoad(e *kubeEnv, cgroup string) *loadWatch {
	w := &loadWatch{cgroup: cgroup, done: make(chan struct{}), lo: -1, started: time.Now()}
	for _, find := range []func() (int, error){e.cluster.APIServerPID, e.cluster.EtcdPID} {
		if pid, err := find(); err == nil {
			w.pids = append(w.pids, pid)
		}
	}
	for _, p := range e.replicas {
		w.portals = append(w.portals, p.cmd.Process.Pid)
	}
	w.busy, w.all = cpuTicks()
	w.portalCPU = procCPU(w.portals)
	w.cpUsage, w.throttled0, w.soak0 = procCPU(w.pids), cgroupThrottled(cgroup), cgroupThrottled(soakCgroup)
	w.sample()
	w.wg.Go(func() {
		for {
			select {
			case <-w.done:
				return
			case <-time.After(time.Second):
				w.sample()
			}
		}
	})
	return w
}

func (w *loadWatch) sample() {
	buf, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(buf))
	if len(f) == 0 {
		return
	}
	l, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lo < 0 || l < w.lo {
		w.lo = l
	}
	w.hi = max(w.hi, l)
}

// stop ends the sampling and says what it saw: the 1-minute load average's
// range, the machine's CPU use, the control plane's (its throttled time
// too: the share's quota bit) and the portals'.
func (w *loadWatch) stop() string {
	close(w.done)
	w.wg.Wait()
	w.sample()
	busy, all := cpuTicks()
	took := time.Since(w.started)
	s := fmt.Sprintf("load average (1 min) %.1f–%.1f, the machine's CPUs %.0f%% busy", w.lo, w.hi, 100*float64(busy-w.busy)/float64(max(all-w.all, 1)))
	s += fmt.Sprintf(", apiserver+etcd %.2f cores", float64(procCPU(w.pids)-w.cpUsage)/float64(took))
	w.portalCPU = procCPU(w.portals) - w.portalCPU
	s += fmt.Sprintf(", the portals %.2f cores", float64(w.portalCPU)/float64(took))
	if w.cgroup != "" {
		s += fmt.Sprintf(" (held back by their share's quota %s)", time.Duration(cgroupThrottled(w.cgroup)-w.throttled0).Round(time.Millisecond))
	}
	if soakCgroup != "" {
		s += fmt.Sprintf(", the soak's share held back by its quota %s", time.Duration(cgroupThrottled(soakCgroup)-w.soak0).Round(time.Millisecond))
	}
	return s
}

// cpuTicks returns the machine's busy and total CPU ticks (/proc/stat).
func cpuTicks() (busy, all uint64) {
	buf, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(buf), "\n")
	for i, f := range strings.Fields(line)[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		all += n
		if i != 3 && i != 4 { // idle, iowait
			busy += n
		}
	}
	return busy, all
}

// cgroupThrottled returns how long a cgroup's quota held it back, in ns
// (cpu.stat: v2 throttled_usec, v1 throttled_time), 0 when unknown.
func cgroupThrottled(dir string) uint64 {
	if dir == "" {
		return 0
	}
	buf, _ := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	for line := range strings.Lines(string(buf)) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		n, _ := strconv.ParseUint(v, 10, 64)
		switch k {
		case "throttled_usec":
			return n * 1000
		case "throttled_time":
			return n
		}
	}
	return 0
}

// procCPU returns the CPU time pids used so far (/proc/PID/stat's utime
// and stime, at the kernel's 100 ticks a second).
func procCPU(pids []int) time.Duration {
	var ticks uint64
	for _, pid := range pids {
		buf, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		s := string(buf)
		if i := strings.LastIndexByte(s, ')'); i > 0 {
			f := strings.Fields(s[i+1:])
			if len(f) > 13 {
				u, _ := strconv.ParseUint(f[11], 10, 64)
				k, _ := strconv.ParseUint(f[12], 10, 64)
				ticks += u + k
			}
		}
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}
