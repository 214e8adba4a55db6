package soak

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// scale is the size of a run: SOAK_SCALE=short (CI, within 6 minutes on 2
// cores), default (within 20) or full (default with a 1,000-user morning
// storm).
type scale struct {
	Name     string
	Members  int           // claim storm: members of the pool
	Users    int           // claim storm: distinct users
	Ops      int           // claim storm: claim and release operations
	Workers  int           // claim storm: concurrent clients
	Hold     int           // faults: claims held across them
	EtcdStop time.Duration // faults: how long etcd is paused
	Sessions int           // load: concurrent console sessions
	LoadFor  time.Duration // load: how long they are held
	Desktops int           // load: real local desktops
	FuzzTime time.Duration // per fuzz target
	// The morning storm: StormUsers users claim once each over StormOver
	// from a pool of as many members (stormPhase).
	StormUsers int
	StormOver  time.Duration
	// SerialWarm is how many warm claims alone the storm is set beside
	// (each holds its member until the storm, so a small pool has few).
	SerialWarm int
}

var scales = map[string]scale{
	"short": {Name: "short", Members: 20, Users: 100, Ops: 800, Workers: 30, Hold: 6, EtcdStop: 5 * time.Second,
		Sessions: 40, LoadFor: 15 * time.Second, Desktops: 2, FuzzTime: 3 * time.Second, StormUsers: 30, StormOver: 10 * time.Second, SerialWarm: 5},
	"default": {Name: "default", Members: 100, Users: 1000, Ops: 10000, Workers: 150, Hold: 20, EtcdStop: 15 * time.Second,
		Sessions: 200, LoadFor: 60 * time.Second, Desktops: 4, FuzzTime: 10 * time.Second, StormUsers: 300, StormOver: 60 * time.Second, SerialWarm: 30},
	// full is default with the whole morning: 1,000 users over 60 s
	// from a 1,000-member pool (more than 2 shared cores carry; see
	// docs/reliability.md).
	"full": {Name: "full", Members: 100, Users: 1000, Ops: 10000, Workers: 150, Hold: 20, EtcdStop: 15 * time.Second,
		Sessions: 200, LoadFor: 60 * time.Second, Desktops: 4, FuzzTime: 10 * time.Second, StormUsers: 1000, StormOver: 60 * time.Second, SerialWarm: 30},
}

var binary string

func TestMain(m *testing.M) {
	if os.Getenv("SOAK_SCALE") == "" {
		os.Exit(m.Run()) // TestSoak skips
	}
	dir, err := os.MkdirTemp("", "corral-soak-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "corral-vdi-portal")
	build := exec.Command("go", "build", "-o", binary, "../cmd/corral-vdi-portal")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "soak: build portal:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestSoak is `make soak`: every phase adds checks to one report, printed
// at the end; the test fails when any check failed.
func TestSoak(t *testing.T) {
	name := os.Getenv("SOAK_SCALE")
	if name == "" {
		t.Skip("the soak runs with SOAK_SCALE=short or default (make soak)")
	}
	sc, ok := scales[name]
	if !ok {
		t.Fatalf("SOAK_SCALE=%q; want short, default or full", name)
	}
	r := &report{start: time.Now()}
	defer func() {
		r.print(os.Stdout)
		if out := os.Getenv("SOAK_REPORT"); out != "" {
			var buf bytes.Buffer
			r.markdown(&buf, sc.Name)
			os.WriteFile(out, buf.Bytes(), 0o644)
		}
		if n := r.failed(); n > 0 {
			t.Errorf("%d checks failed", n)
		}
	}()
	fixSoakCPU(t, r)
	only := os.Getenv("SOAK_ONLY") // e.g. "kube,fuzz": run only these phases
	phase := func(name string, f func(t *testing.T, sc scale, r *report)) {
		if only != "" && !strings.Contains(","+only+",", ","+name+",") {
			return
		}
		start := time.Now()
		t.Run(name, func(t *testing.T) { f(t, sc, r) })
		r.note("phase %s took %s", name, time.Since(start).Round(time.Second))
	}
	phase("kube", kubePhase)
	phase("storm", stormPhase)
	phase("local", localPhase)
	phase("fuzz", fuzzPhase)
}

// portal is a running portal binary.
type portal struct {
	URL  string
	Data string
	env  []string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
}

var servingRE = regexp.MustCompile(`serving on (http://\S+)`)

// startPortal starts the binary on data with env; it is stopped when t ends.
func startPortal(t *testing.T, data, listen string, env ...string) *portal {
	t.Helper()
	p, err := launch(t, data, listen, env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func launch(t *testing.T, data, listen string, env []string) (*portal, error) {
	// SOAK_LOGS keeps the portals' logs (at Info: slow claims' traces,
	// shard handovers) in a folder of its own after the run.
	dir, pattern := t.TempDir(), "portal-*.log"
	if keep := os.Getenv("SOAK_LOGS"); keep != "" {
		dir, pattern = keep, strings.ReplaceAll(t.Name(), "/", "-")+"-portal-*.log"
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("SOAK_LOGS: %w", err)
		}
	}
	logf, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(binary, "serve")
	cmd.Env = append(os.Environ(), "CORRAL_VDI_DATA_DIR="+data, "CORRAL_VDI_LISTEN="+listen,
		"CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=true")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &portal{Data: data, env: env, cmd: cmd, log: logf, done: make(chan struct{})}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				urls <- m[1]
			}
		}
		cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop() })
	select {
	case p.URL = <-urls:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("portal exited before serving; log:\n%s", p.logText())
	case <-time.After(60 * time.Second):
		return nil, fmt.Errorf("portal did not start in 60s; log:\n%s", p.logText())
	}
}

// stop sends SIGTERM and waits (SIGKILL after 30 s).
func (p *portal) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.done
	}
}

// kill sends SIGKILL and waits for the process to end.
func (p *portal) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func (p *portal) logText() string {
	buf, _ := os.ReadFile(p.log.Name())
	if len(buf) > 4000 {
		buf = buf[len(buf)-4000:]
	}
	return string(buf)
}

// client is shared by every request of the soak: enough idle connections
// that the storm measures the portals, not TCP handshakes.
var client = &http.Client{
	Timeout:   30 * time.Second,
	Transport: &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 300, IdleConnTimeout: 30 * time.Second},
}

// call does method path on base as user (Tailscale header, trusted from
// loopback); it returns the status (0 with err when no answer) and body.
func call(ctx context.Context, base, user, method, path, body string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if user != "" {
		req.Header.Set("Tailscale-User-Login", user)
	}
	res, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	buf, err := io.ReadAll(res.Body)
	return res.StatusCode, buf, err
}

// desktop is the JSON of a desktop.
type desktop struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Pool      string `json:"pool"`
	Power     string `json:"power"`
	Reason    string `json:"reason"`
	Holder    string `json:"holder"`
}

func decode[T any](buf []byte) (T, error) {
	var v T
	err := json.Unmarshal(buf, &v)
	return v, err
}

// eventually polls cond every 200 ms until it holds or d passes; it
// returns how long it took and whether it held.
func eventually(d time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	for end := start.Add(d); ; time.Sleep(200 * time.Millisecond) {
		if cond() {
			return time.Since(start), true
		}
		if time.Now().After(end) {
			return time.Since(start), false
		}
	}
}

// counts is a concurrency-safe tally of answers by status.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *counts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var parts []string
	for _, k := range []string{"200", "409", "429", "403"} {
		if c.m[k] > 0 {
			parts = append(parts, k+":"+strconv.Itoa(c.m[k]))
		}
	}
	for k, v := range c.m {
		if k != "200" && k != "409" && k != "429" && k != "403" {
			parts = append(parts, k+":"+strconv.Itoa(v))
		}
	}
	return strings.Join(parts, " ")
}

// rssKiB returns the resident memory of pid.
func rssKiB(pid int) int64 {
	buf, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(buf), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			n, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime returns the user+system CPU time pid has used.
func cpuTime(pid int) time.Duration {
	buf, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(buf)
	if i := strings.LastIndexByte(s, ')'); i > 0 {
		f := strings.Fields(s[i+2:])
		if len(f) > 12 {
			u, _ := strconv.ParseInt(f[11], 10, 64)
			k, _ := strconv.ParseInt(f[12], 10, 64)
			return time.Duration(u+k) * time.Second / 100 // USER_HZ
		}
	}
	return 0
}
