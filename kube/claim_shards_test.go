package kube_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/corral-dev/corral-vdi-portal/handlers"
	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// view is the live replicas as every test replica sees them; tests
// change it to move the shards.
type view struct{ live atomic.Pointer[[]string] }

func newView(live ...string) *view {
	v := &view{}
	v.set(live...)
	return v
}

func (v *view) set(live ...string) { v.live.Store(&live) }

// viewOf is replica self's vdi.Replicas under v.
type viewOf struct {
	self string
	v    *view
}

func (r viewOf) Live() (string, []string) { return r.self, *r.v.live.Load() }

// direct forwards a take to the Service named by url, in process (the
// signed peer request is handlers' TestPeerTake's).
type direct struct {
	mu   sync.Mutex
	svcs map[string]*vdi.Service
}

func (d *direct) ForwardTake(ctx context.Context, url string, req vdi.TakeRequest) (vdi.TakeAnswer, error) {
	d.mu.Lock()
	svc := d.svcs[url]
	d.mu.Unlock()
	if svc == nil {
		return vdi.TakeAnswer{}, fmt.Errorf("no replica at %s", url)
	}
	return svc.TakeForwarded(ctx, req)
}

// countingLeases counts the writes of members' Leases and of claim locks.
type countingLeases struct {
	vdi.Leases
	members, locks *atomic.Int64
}

func (c countingLeases) count(l *vdi.Lease) {
	switch l.Pool {
	case "claim.lock":
		c.locks.Add(1)
	case "claim.shard":
	default:
		c.members.Add(1)
	}
}

func (c countingLeases) Create(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	c.count(l)
	return c.Leases.Create(ctx, l)
}

func (c countingLeases) Update(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	c.count(l)
	return c.Leases.Update(ctx, l)
}

// shardReplicas starts n replicas of one portal, each its own Leases
// client and cache of the shared cluster, running claims by shard over
// backend, until t ends; all live.
func shardReplicas(t *testing.T, ns string, n int, backend vdi.Backend, maxPerUser int, members, locks *atomic.Int64) []*vdi.Service {
	c := testcluster.Shared(t)
	var names []string
	for i := range n {
		names = append(names, fmt.Sprintf("r%d", i))
	}
	v := newView(names...)
	f := newShardFleet(t, ns, backend, maxPerUser)
	svcs := make([]*vdi.Service, n)
	for i, name := range names {
		svcs[i] = f.start(name, countingLeases{mustLeases(t, c.Config), members, locks}, v)
	}
	return svcs
}

// shardFleet starts replicas of one portal running claims by shard,
// forwarding to each other in process, until the test ends.
type shardFleet struct {
	t          *testing.T
	ns         string
	backend    vdi.Backend
	maxPerUser int
	claimWait  time.Duration // the replicas' vdi.Config.ClaimWait (0: its default)
	fw         *direct
	ctx        context.Context
	wg         sync.WaitGroup
	logs       testlog.Buffer              // the replicas' logs, shown when the test fails
	clocks     map[string]clock.WithTicker // the replicas' shard clocks by name (none: the real one)
	nows       map[string]func() time.Time // the replicas' vdi.Config.Now by name (none: time.Now)
	stops      sync.Map                    // the replicas' stops by name (stop)
}

func newShardFleet(t *testing.T, ns string, backend vdi.Backend, maxPerUser int) *shardFleet {
	ctx, cancel := context.WithCancel(context.Background())
	f := &shardFleet{t: t, ns: ns, backend: backend, maxPerUser: maxPerUser, fw: &direct{svcs: map[string]*vdi.Service{}}, ctx: ctx}
	t.Cleanup(func() {
		cancel()
		f.wg.Wait()
		if t.Failed() {
			t.Logf("the replicas' logs:\n%s", f.logs.String())
		}
	})
	return f
}

// waitLogged waits until the replicas have logged a message that starts
// with msg n times.
func (f *shardFleet) waitLogged(t *testing.T, msg string, n int) {
	t.Helper()
	for end := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got := strings.Count(f.logs.String(), `msg="`+msg)
		if got >= n {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("the replicas logged %q %d times in a minute; want %d", msg, got, n)
		}
	}
}

// start starts replica name on leases, seeing the live replicas in v,
// until the test ends or stop(name).
func (f *shardFleet) start(name string, leases vdi.Leases, v *view) *vdi.Service {
	svc := vdi.NewService(vdi.Config{Backend: f.backend, Leases: leases, Audit: nopAudit{},
		Log:                slog.New(slog.NewTextHandler(&f.logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", name),
		MaxDesktopsPerUser: f.maxPerUser, LockNamespace: f.ns, Replicas: viewOf{name, v}, ClaimWait: f.claimWait, Now: f.nows[name],
		Shards: &vdi.ShardConfig{URL: func() string { return name }, Forward: f.fw, Clock: f.clocks[name]}})
	f.fw.mu.Lock()
	f.fw.svcs[name] = svc
	f.fw.mu.Unlock()
	ctx, stop := context.WithCancel(f.ctx)
	f.stops.Store(name, stop)
	f.wg.Go(func() { svc.RunShards(ctx) })
	return svc
}

// stop stops replica name's claims by shard, as the portal's stop does;
// it does not wait for them to end.
func (f *shardFleet) stop(name string) {
	if stop, ok := f.stops.Load(name); ok {
		stop.(context.CancelFunc)()
	}
}

// TestLeasesByShard runs the whole claim suite with the child portals'
// claims by shard, as the portal's ServiceAccount: each child a replica
// with its heartbeat, forwarding over signed peer requests.
func TestLeasesByShard(t *testing.T) {
	c := testcluster.Shared(t)
	c.Apply(t, filepath.Join("..", "deploy", "rbac.yaml"))
	sa := c.PortalServiceAccount(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Store {
		s := kubeStore(t, c, sa)
		s.Shards = true
		return s
	})
}

// kubeShards sets claims by shard up in a child portal (leasetest.Sharder):
// its heartbeat in ns, and the forwarded claims served on a port of its
// own, signed with a secret every child shares.
func kubeShards(ctx context.Context, child, ns string) (vdi.Replicas, *vdi.ShardConfig, func(*vdi.Service) func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", child)
	if err != nil {
		return nil, nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, nil, err
	}
	secret := []byte("the-suite-children-peer-secret-0")
	o := kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: cs, Namespace: ns, Identity: fmt.Sprintf("child-%d", os.Getpid())})
	o.SetURL("http://" + ln.Addr().String())
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { o.Run(ctx) })
	serve := func(svc *vdi.Service) func() {
		srv := &http.Server{Handler: handlers.PeerTakes(secret, svc, slog.Default())}
		wg.Go(func() { srv.Serve(ln) })
		wg.Go(func() { svc.RunShards(ctx) })
		return func() {
			cancel()
			srv.Close()
			wg.Wait()
		}
	}
	return o, &vdi.ShardConfig{URL: o.URL, Forward: handlers.TakeForwarder{Secret: secret}}, serve, nil
}

// TestClaimsByShard_OneWritePerClaim: with claims by shard, 20 users'
// claims on three replicas write one Lease each (their members'), and no
// claim lock. One user's racing claims, and a quota at its edge, are the
// suite's (TestLeasesByShard's OneUserRace).
func TestClaimsByShard_OneWritePerClaim(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	var members, locks atomic.Int64
	svcs := shardReplicas(t, ns, 3, leasetest.NewPool(ns, "p", 30, 30), 0, &members, &locks)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			if _, err := svcs[i%3].Claim(ctx, vdi.Identity{Login: fmt.Sprintf("u%d", i)}, ns, "p"); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if m, l := members.Load(), locks.Load(); m != 20 || l != 0 {
		t.Errorf("20 users' claims wrote %d members' Leases and %d claim locks; want 20 and 0", m, l)
	}
}
