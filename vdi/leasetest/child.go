package leasetest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The suite starts portals as child processes of the test binary; these
// variables tell a child which store to open and what to claim.
const (
	envChild = "CORRAL_LEASETEST_CHILD"
	envJob   = "CORRAL_LEASETEST_JOB"
)

// Opener opens, in a child process, a client of the store that Store.Child
// names; closeFn releases it.
type Opener func(ctx context.Context, child string) (leases vdi.Leases, closeFn func(), err error)

// MaybeChild runs this process as one of the suite's portals and exits,
// when the suite started it; otherwise it returns at once. Call it first in
// TestMain, before anything else starts.
func MaybeChild(open Opener) {
	child := os.Getenv(envChild)
	if child == "" {
		return
	}
	if err := runChild(open, child); err != nil {
		fmt.Fprintln(os.Stderr, "leasetest child:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// job is what one child portal does: claim from its pool for each of Users
// at once.
type job struct {
	Namespace  string
	Pool       string
	Members    int
	Running    int
	Users      []string
	StartDelay time.Duration
	// Pools, when set, are the pools (of Members each) the portal has
	// instead of Pool; claim i goes to Pools[i%len(Pools)].
	Pools []string
	// MaxPerUser is the portal's per-user quota (0: none).
	MaxPerUser int
	// Shards runs the portal's claims by shard (Store.Shards).
	Shards bool
}

// result is one claimant's outcome.
type result struct {
	User    string        `json:"user"`
	Member  string        `json:"member,omitempty"`
	Code    vdi.Code      `json:"code,omitempty"`
	Err     string        `json:"err,omitempty"`
	Latency time.Duration `json:"latency"`
}

// runChild opens the store, says "ready", waits for a line on stdin, runs
// the job and prints one JSON result per line as each claim ends.
func runChild(open Opener, child string) error {
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	var j job
	if err := json.Unmarshal([]byte(os.Getenv(envJob)), &j); err != nil {
		return fmt.Errorf("job: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	leases, closeFn, err := open(ctx, child)
	if err != nil {
		return fmt.Errorf("open %s: %w", child, err)
	}
	defer closeFn()
	var backend vdi.Backend
	pools := j.Pools
	if len(pools) == 0 {
		pool := NewPool(j.Namespace, j.Pool, j.Members, j.Running)
		pool.StartDelay = j.StartDelay
		backend, pools = pool, []string{j.Pool}
	} else {
		var ps Pools
		for _, name := range j.Pools {
			ps = append(ps, NewPool(j.Namespace, name, j.Members, j.Running))
		}
		backend = ps
	}
	cfg := vdi.Config{Backend: backend, Leases: leases, Audit: nopAudit{},
		Log: slog.New(slog.DiscardHandler), MaxDesktopsPerUser: j.MaxPerUser, LockNamespace: j.Namespace}
	var serve func(*vdi.Service) func()
	if j.Shards {
		if sharder == nil {
			return fmt.Errorf("the store runs claims by shard, and TestMain called MaybeChild, not MaybeChildSharded")
		}
		if cfg.Replicas, cfg.Shards, serve, err = sharder(ctx, child, j.Namespace); err != nil {
			return fmt.Errorf("claims by shard: %w", err)
		}
	}
	svc := vdi.NewService(cfg)
	if serve != nil {
		defer serve(svc)() // let the shards go before the portal exits
	}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	results := runClaims(ctx, svc, j.Namespace, pools, j.Users)
	var mu sync.Mutex
	enc := json.NewEncoder(os.Stdout)
	for r := range results {
		mu.Lock()
		err := enc.Encode(r)
		mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

// runClaims claims for every user at once, claim i from pools[i%len(pools)],
// and sends each outcome as it ends.
func runClaims(ctx context.Context, svc *vdi.Service, ns string, pools, users []string) <-chan result {
	out := make(chan result, len(users))
	var wg sync.WaitGroup
	for i, u := range users {
		wg.Go(func() {
			start := time.Now()
			d, err := svc.Claim(ctx, vdi.Identity{Login: u}, ns, pools[i%len(pools)])
			r := result{User: u, Member: d.Name, Latency: time.Since(start)}
			if err != nil {
				r.Code, r.Err, r.Member = vdi.ErrorCode(err), err.Error(), ""
			}
			out <- r
		})
	}
	go func() { wg.Wait(); close(out) }()
	return out
}

// proc is a child portal seen from the test.
type proc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	done   chan struct{} // stdout closed
	stderr bytes.Buffer

	mu      sync.Mutex
	results []result
	bad     []string
}

// spawn starts a child portal of s running j; it is killed when t ends.
func spawn(t *testing.T, s Store, j job) *proc {
	t.Helper()
	j.Shards = s.Shards
	buf, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{ready: make(chan struct{}), done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	p.cmd.Env = append(os.Environ(), envChild+"="+s.Child, envJob+"="+string(buf))
	p.cmd.Stderr = &p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Bytes()
			if string(line) == "ready" {
				close(p.ready)
				continue
			}
			var r result
			p.mu.Lock()
			if err := json.Unmarshal(line, &r); err != nil {
				p.bad = append(p.bad, string(line))
			} else {
				p.results = append(p.results, r)
			}
			p.mu.Unlock()
		}
	}()
	return p
}

// waitReady waits until every child has opened its store.
func waitReady(t *testing.T, procs []*proc) {
	t.Helper()
	timeout := time.After(90 * time.Second)
	for i, p := range procs {
		select {
		case <-p.ready:
		case <-p.done:
			t.Fatalf("child portal %d ended before it was ready: %s", i, p.stderr.String())
		case <-timeout:
			t.Fatalf("child portal %d not ready after 90s: %s", i, p.stderr.String())
		}
	}
}

// wait waits for the child to end and returns its results.
func (p *proc) wait(t *testing.T, i int) []result {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("child portal %d still running after 3m", i)
	}
	err := p.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		t.Errorf("child portal %d printed %d lines that are not results, e.g. %q", i, len(p.bad), p.bad[0])
	}
	if err != nil && p.cmd.ProcessState.ExitCode() != -1 { // -1: killed by the test
		t.Errorf("child portal %d: %v: %s", i, err, p.stderr.String())
	}
	return p.results
}

// count returns how many results the child printed so far.
func (p *proc) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.results)
}
