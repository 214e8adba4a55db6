package soak

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

// check is one line of the report: a figure with its threshold, or a fault
// with what must hold after it.
type check struct {
	Area   string
	Name   string
	Figure string // what was measured
	Want   string // the threshold or what must hold
	OK     bool
}

// report collects the checks of a run.
type report struct {
	mu     sync.Mutex
	checks []check
	start  time.Time
	notes  []string
}

// add records a check and logs it at once, so a run cut short still shows
// what it got to.
func (r *report) add(area, name string, ok bool, want, figure string, args ...any) {
	if len(args) > 0 {
		figure = fmt.Sprintf(figure, args...)
	}
	if len(figure) > 160 {
		figure = figure[:157] + "..."
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks = append(r.checks, check{area, name, figure, want, ok})
	mark := "ok  "
	if !ok {
		mark = "FAIL"
	}
	fmt.Fprintf(os.Stderr, "soak: %s %-8s %-44s %s (want %s)\n", mark, area, name, figure, want)
}

// note records a fact for the report that is not a check.
func (r *report) note(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// failed returns how many checks failed.
func (r *report) failed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, c := range r.checks {
		if !c.OK {
			n++
		}
	}
	return n
}

// print writes the table and the final "N passed, M failed" line.
func (r *report) print(w io.Writer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(w, "\n%-4s  %-8s  %-44s  %-40s  %s\n", "", "area", "check", "figure", "threshold")
	failed := 0
	for _, c := range r.checks {
		mark := "ok"
		if !c.OK {
			mark, failed = "FAIL", failed+1
		}
		fmt.Fprintf(w, "%-4s  %-8s  %-44s  %-40s  %s\n", mark, c.Area, c.Name, c.Figure, c.Want)
	}
	for _, n := range r.notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	fmt.Fprintf(w, "%d passed, %d failed\n", len(r.checks)-failed, failed)
}

// markdown writes the run as the figures section of docs/reliability.md.
func (r *report) markdown(w io.Writer, scale string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "Run of %s, `SOAK_SCALE=%s`, %s on %s: %d CPUs, %s RAM, load average at the start %s; took %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), scale, runtime.Version(), host, runtime.NumCPU(), memTotal(),
		strings.Fields(string(load) + " ?")[0], time.Since(r.start).Round(time.Second))
	fmt.Fprintf(w, "| | area | check | figure | threshold |\n|---|---|---|---|---|\n")
	failed := 0
	for _, c := range r.checks {
		mark := "ok"
		if !c.OK {
			mark, failed = "**FAIL**", failed+1
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s |\n", mark, c.Area, c.Name, esc(c.Figure), esc(c.Want))
	}
	fmt.Fprintf(w, "\n%d passed, %d failed\n", len(r.checks)-failed, failed)
	if len(r.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.notes {
			fmt.Fprintf(w, "- %s\n", n)
		}
	}
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// memTotal returns the machine's memory as "N GiB".
func memTotal() string {
	buf, _ := os.ReadFile("/proc/meminfo")
	var kb int64
	fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(buf), "\n", 2)[0], "MemTotal:"), "%d", &kb)
	return fmt.Sprintf("%d GiB", (kb+512*1024)/(1024*1024))
}

// percentile returns the p-th percentile (0..100) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

// ms formats d in milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
