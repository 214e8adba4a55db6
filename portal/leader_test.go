package portal

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testpg"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestMain(m *testing.M) {
	code := testcluster.Main(m)
	testpg.Stop()
	os.Exit(code)
}

// tlog writes log lines to the test's log.
type tlog struct {
	t    *testing.T
	name string
}

func (w tlog) Write(p []byte) (int, error) {
	w.t.Log(w.name + ": " + strings.TrimSpace(string(p)))
	return len(p), nil
}

type replica struct {
	m      *Main
	cancel context.CancelFunc
	done   chan error
}

// startReplica runs a portal on the kube backend as the portal's
// ServiceAccount, with short leader-election times.
func startReplica(t *testing.T, name, kubeconfig, ns string) *replica {
	t.Helper()
	env := map[string]string{
		"HOME": t.TempDir(), "CORRAL_VDI_LISTEN": "127.0.0.1:0", "CORRAL_VDI_DATA_DIR": t.TempDir(),
		"KUBECONFIG": kubeconfig, "CORRAL_VDI_NAMESPACE": ns, "CORRAL_VDI_AUTH": "dev",
		"CORRAL_VDI_RECLAIM_INTERVAL": "200ms", "CORRAL_VDI_DISCONNECT_GRACE": "1s",
	}
	cfg, err := ParseConfig(nil, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Server.Backend != BackendKube {
		t.Fatalf("backend %q with KUBECONFIG set; want kube", cfg.Server.Backend)
	}
	cfg.Kube.Leader = LeaderTiming{LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond}
	m := &Main{Config: cfg, Log: slog.New(slog.NewTextHandler(tlog{t, name}, nil)), Out: tlog{t, name}}
	ctx, cancel := context.WithCancel(context.Background())
	if err := m.Open(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	r := &replica{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- m.Run(ctx) }()
	t.Cleanup(func() {
		r.stop()
		m.Close()
	})
	return r
}

func (r *replica) stop() {
	r.cancel()
	<-r.done
	r.done <- nil // later stops return at once
}

func waitFor(t *testing.T, within time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > within {
			t.Fatalf("after %s: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// reclaims counts the portal's audit entries of reclaiming member.
func reclaims(t *testing.T, r *replica, member string) int {
	t.Helper()
	entries, err := r.m.db.AuditLog(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.Action == "reclaim" && e.Target == member {
			n++
		}
	}
	return n
}

// TestReclaimLeader runs two portals against one cluster: exactly one runs
// the reclaim loop, a due claim is reclaimed once, and when the leader
// stops the other takes over within the lease duration.
func TestReclaimLeader(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	c.StartKubeVirtStandIn(t)
	c.Apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	ns := c.Namespace(t)
	sa := c.PortalServiceAccount(t)
	kubeconfig := testcluster.WriteKubeconfig(t, sa)

	admin := c.AdminClient(t)
	vms, err := kube.NewVMs(kube.Config{REST: sa, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"rc-1", "rc-2"} {
		testcluster.StoppedVM(t, admin, ns, name, map[string]string{vdi.LabelPool: "rc"})
		if err := vms.Start(ctx, vdi.Ref{Namespace: ns, Name: name}); err != nil {
			t.Fatal(err)
		}
	}
	cs := testcluster.Clientset(t, c.Config)
	claims := kube.NewLeases(kube.LeasesConfig{Client: cs, Namespace: ns})
	// claim makes a claim whose disconnect grace (1s) ran out long ago.
	claim := func(member string) {
		t.Helper()
		now := time.Now()
		if _, err := claims.Create(ctx, &vdi.Lease{Namespace: ns, Member: member, Pool: "rc", Holder: "alice",
			AcquireTime: now.Add(-time.Minute), RenewTime: now, Duration: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	gone := func(member string) func() bool {
		return func() bool {
			_, err := cs.CoordinationV1().Leases(ns).Get(ctx, vdi.LeasePrefix+member, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}
	}
	holder := func() string {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, ReclaimerLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	a := startReplica(t, "a", kubeconfig, ns)
	b := startReplica(t, "b", kubeconfig, ns)
	took := waitFor(t, 10*time.Second, "no portal leads", func() bool { return a.m.Leading() || b.m.Leading() })
	t.Logf("first leader after %s", took)
	// Exactly one leads, and keeps leading, for a few renewals.
	for i := 0; i < 10; i++ {
		if a.m.Leading() == b.m.Leading() {
			t.Fatalf("a leading %v, b leading %v; want exactly one", a.m.Leading(), b.m.Leading())
		}
		time.Sleep(100 * time.Millisecond)
	}
	leader, follower := a, b
	if b.m.Leading() {
		leader, follower = b, a
	}
	if h := holder(); h != leader.m.identity {
		t.Errorf("Lease %s held by %q; want the leader %q", ReclaimerLease, h, leader.m.identity)
	}

	claim("rc-1")
	waitFor(t, 10*time.Second, "rc-1's due claim was not reclaimed", gone("rc-1"))
	time.Sleep(500 * time.Millisecond) // more reclaim rounds on both
	if n, m := reclaims(t, leader, "rc-1"), reclaims(t, follower, "rc-1"); n != 1 || m != 0 {
		t.Errorf("rc-1 reclaimed %d times by the leader and %d by the follower; want 1 and 0", n, m)
	}

	start := time.Now()
	leader.stop()
	took = waitFor(t, 2*time.Second+time.Second, "the follower did not take over within the lease duration", follower.m.Leading)
	t.Logf("takeover after the leader stopped: %s (from stop: %s)", took, time.Since(start))
	if h := holder(); h != follower.m.identity {
		t.Errorf("Lease %s held by %q after the takeover; want %q", ReclaimerLease, h, follower.m.identity)
	}

	claim("rc-2")
	waitFor(t, 10*time.Second, "rc-2's due claim was not reclaimed after the takeover", gone("rc-2"))
	time.Sleep(500 * time.Millisecond)
	if n, m := reclaims(t, follower, "rc-2"), reclaims(t, leader, "rc-2"); n != 1 || m != 0 {
		t.Errorf("rc-2 reclaimed %d times by the new leader and %d by the stopped one; want 1 and 0", n, m)
	}
	if n := reclaims(t, follower, "rc-1") + reclaims(t, leader, "rc-1"); n != 1 {
		t.Errorf("rc-1 reclaimed %d times in all; want 1", n)
	}
}

// TestBackendChoice: local without a cluster config, kube with one, and a
// clear error when kube is asked for without one.
func TestBackendChoice(t *testing.T) {
	home := t.TempDir()
	parse := func(env map[string]string) (Config, error) {
		env["HOME"] = home
		env["CORRAL_VDI_DATA_DIR"] = t.TempDir()
		return ParseConfig(nil, func(k string) string { return env[k] })
	}
	if c, err := parse(map[string]string{}); err != nil || c.Server.Backend != BackendLocal {
		t.Errorf("no kubeconfig: backend %q, %v; want local", c.Server.Backend, err)
	}
	if c, err := parse(map[string]string{}); err == nil && c.Kube.Namespace == "" {
		t.Errorf("namespace empty; want a default")
	}
	_, err := parse(map[string]string{"CORRAL_VDI_BACKEND": "kube"})
	if err == nil || !strings.Contains(err.Error(), "no cluster config found") || strings.Contains(err.Error(), "\n") {
		t.Errorf("kube without a cluster config: %v; want a one-line error", err)
	}
	if err := os.MkdirAll(filepath.Join(home, ".kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(home, ".kube", "config")
	if err := os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := parse(map[string]string{}); err != nil || c.Server.Backend != BackendKube || c.Kube.Kubeconfig != path {
		t.Errorf("with ~/.kube/config: backend %q kubeconfig %q, %v; want kube", c.Server.Backend, c.Kube.Kubeconfig, err)
	}
	if c, err := parse(map[string]string{"CORRAL_VDI_BACKEND": "local"}); err != nil || c.Server.Backend != BackendLocal {
		t.Errorf("CORRAL_VDI_BACKEND=local with ~/.kube/config: %q, %v", c.Server.Backend, err)
	}
	if c, err := parse(map[string]string{"CORRAL_VDI_NAMESPACE": "corral"}); err != nil || c.Kube.Namespace != "corral" {
		t.Errorf("namespace %q, %v; want corral", c.Kube.Namespace, err)
	}
	if _, err := parse(map[string]string{"CORRAL_VDI_BACKEND": "nomad"}); err == nil {
		t.Errorf("backend nomad accepted")
	}
}

// TestTakeoverFromCrashedLeader: a leader that died without releasing the
// Lease is replaced once its lease duration has run out, not before.
func TestTakeoverFromCrashedLeader(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := testcluster.Shared(t)
	c.Apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	ns := c.Namespace(t)
	sa := testcluster.Clientset(t, c.PortalServiceAccount(t))
	crashed, secs, now := "crashed-replica", int32(2), metav1.NewMicroTime(time.Now())
	if _, err := sa.CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: ReclaimerLease},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &crashed, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var leading atomic.Bool
	ran := make(chan struct{}, 1)
	e := &elector{client: sa, namespace: ns, name: ReclaimerLease, identity: newIdentity(), leading: &leading,
		timing: LeaderTiming{LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond},
		log:    slog.New(slog.NewTextHandler(tlog{t, "e"}, nil))}
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.run(ctx, func(ctx context.Context) { ran <- struct{}{}; <-ctx.Done() })
	}()
	select {
	case <-ran:
	case <-time.After(60 * time.Second):
		t.Fatal("no takeover from a crashed leader within 60s (lease duration 2s)")
	}
	took := time.Since(start)
	t.Logf("took over from a crashed leader after %s (lease duration 2s)", took)
	// The elector saw the crashed leader's Lease only after start: a
	// takeover sooner than the lease duration did not wait it out.
	if took < 2*time.Second {
		t.Errorf("takeover after %s; want no sooner than the crashed leader's 2s lease duration", took)
	}
	cancel()
	<-done
	if leading.Load() {
		t.Error("still leading after the context ended")
	}
	l, err := sa.CoordinationV1().Leases(ns).Get(context.Background(), ReclaimerLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Errorf("Lease held by %q after the leader stopped; want released", *h)
	}
}
