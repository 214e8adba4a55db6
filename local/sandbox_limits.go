package local

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultDesktopLimits are the limits of a sandboxed desktop unless
// CORRAL_VDI_DESKTOP_LIMITS says otherwise.
const DefaultDesktopLimits = "nproc=2048,nofile=4096,as=16G,memory=4G,disk=2G,home=4G"

// Limits are the resource limits of a desktop's processes, set (soft and
// hard, so the desktop cannot raise them) by prlimit before each program
// starts. Zero means no limit of that kind.
type Limits struct {
	// NProc is RLIMIT_NPROC: the kernel counts every process and thread of
	// the desktop's uid against it, setsid and nohup leftovers included.
	NProc uint64
	// NoFile is RLIMIT_NOFILE, per process.
	NoFile uint64
	// AS is RLIMIT_AS in bytes, per process.
	AS uint64
	// Memory bounds the memory of all the desktop's processes together, in
	// bytes, where the host gives the portal cgroups (sandbox_cgroup.go).
	Memory uint64
	// PIDs bounds the processes and threads of all the desktop's processes
	// together (the cgroup's pids.max), whatever their uid; zero means
	// NProc.
	PIDs uint64
	// Disk bounds, in bytes, the desktop's /tmp and an ephemeral member's
	// home, each (sandbox_disk.go).
	Disk uint64
	// Home bounds, in bytes, a persistent member's home: the size of its
	// sparse image (sandbox_home.go).
	Home uint64
}

// pidsMax is the cgroup's process limit of l.
func (l Limits) pidsMax() uint64 {
	if l.PIDs > 0 {
		return l.PIDs
	}
	return l.NProc
}

// ParseLimits parses "nproc=N,nofile=N,as=SIZE,memory=SIZE,pids=N,disk=SIZE,home=SIZE" (any subset; SIZE takes a
// K, M or G suffix; "off" for no limit). Empty means DefaultDesktopLimits.
func ParseLimits(s string) (Limits, error) {
	if strings.TrimSpace(s) == "" {
		s = DefaultDesktopLimits
	}
	var l Limits
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return l, fmt.Errorf("CORRAL_VDI_DESKTOP_LIMITS: %q is not name=value (names: nproc, nofile, as, memory, pids, disk, home)", kv)
		}
		n, err := parseSize(v)
		if err != nil {
			return l, fmt.Errorf("CORRAL_VDI_DESKTOP_LIMITS: %s=%q: %w", k, v, err)
		}
		switch k {
		case "nproc":
			l.NProc = n
		case "nofile":
			l.NoFile = n
		case "as":
			l.AS = n
		case "memory":
			l.Memory = n
		case "pids":
			l.PIDs = n
		case "disk":
			l.Disk = n
		case "home":
			l.Home = n
		default:
			return l, fmt.Errorf("CORRAL_VDI_DESKTOP_LIMITS: unknown limit %q (names: nproc, nofile, as, memory, pids, disk, home)", k)
		}
	}
	return l, nil
}

func parseSize(v string) (uint64, error) {
	if v == "off" {
		return 0, nil
	}
	mult := uint64(1)
	switch {
	case strings.HasSuffix(v, "K"):
		mult, v = 1<<10, strings.TrimSuffix(v, "K")
	case strings.HasSuffix(v, "M"):
		mult, v = 1<<20, strings.TrimSuffix(v, "M")
	case strings.HasSuffix(v, "G"):
		mult, v = 1<<30, strings.TrimSuffix(v, "G")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("want a positive number or off")
	}
	return n * mult, nil
}

// prlimitArgs returns prlimit's options for l, ending with "--".
func (l Limits) prlimitArgs() []string {
	var args []string
	add := func(name string, n uint64) {
		if n > 0 {
			v := strconv.FormatUint(n, 10)
			args = append(args, "--"+name+"="+v+":"+v)
		}
	}
	add("nproc", l.NProc)
	add("nofile", l.NoFile)
	add("as", l.AS)
	return append(args, "--")
}

// String describes l for a failed desktop's reason.
func (l Limits) String() string {
	var parts []string
	if l.NProc > 0 {
		parts = append(parts, fmt.Sprintf("%d processes", l.NProc))
	}
	if l.NoFile > 0 {
		parts = append(parts, fmt.Sprintf("%d open files", l.NoFile))
	}
	if l.AS > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB address space", l.AS>>20))
	}
	if l.Memory > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB memory", l.Memory>>20))
	}
	if l.PIDs > 0 {
		parts = append(parts, fmt.Sprintf("%d tasks", l.PIDs))
	}
	if l.Disk > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB disk", l.Disk>>20))
	}
	if l.Home > 0 {
		parts = append(parts, fmt.Sprintf("%d MiB persistent home", l.Home>>20))
	}
	if len(parts) == 0 {
		return "no limits"
	}
	return strings.Join(parts, ", ")
}
