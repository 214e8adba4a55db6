package portal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// ReclaimerLease is the Lease, in the portal's namespace, whose holder runs
// the reclaim loop when several replicas share a cluster.
const ReclaimerLease = "corral-vdi-reclaimer"

// LeaderTiming times the reclaim leader election; zero fields take the
// client-go customary 15s, 10s and 2s.
type LeaderTiming struct {
	// LeaseDuration is how long others wait before taking over a leader
	// that stopped renewing.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader retries renewing before it
	// gives up leading.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try, and the leader renews.
	RetryPeriod time.Duration
}

func (t LeaderTiming) withDefaults() LeaderTiming {
	if t.LeaseDuration <= 0 {
		t.LeaseDuration = 15 * time.Second
	}
	if t.RenewDeadline <= 0 {
		t.RenewDeadline = 10 * time.Second
	}
	if t.RetryPeriod <= 0 {
		t.RetryPeriod = 2 * time.Second
	}
	return t
}

// newIdentity names this process in the election: host name and a random
// suffix, so two portals on one host (or a restarted one) differ.
func newIdentity() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "corral-vdi-portal"
	}
	b := make([]byte, 4)
	rand.Read(b)
	return host + "-" + hex.EncodeToString(b)
}

// elector runs work only while its identity holds the Lease.
type elector struct {
	client    kubernetes.Interface
	namespace string
	name      string
	identity  string
	timing    LeaderTiming
	log       *slog.Logger
	leading   *atomic.Bool
	// labels are written on the Lease while leading; newLeader, when set,
	// is called (in its own goroutine) when another replica leads.
	labels    map[string]string
	newLeader func(ctx context.Context, identity string)
}

// run stands for election until ctx ends. While leading it runs work with
// a context that ends when leadership is lost; after a loss it waits for
// work to return and stands again. On ctx's end a leader releases the
// Lease, so another replica takes over without waiting out its duration.
func (e *elector) run(ctx context.Context, work func(context.Context)) {
	t := e.timing.withDefaults()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: e.namespace, Name: e.name},
		Client:     e.client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: e.identity},
		Labels:     e.labels,
	}
	for ctx.Err() == nil {
		var working sync.Mutex // held while work runs
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			Name:            e.name,
			LeaseDuration:   t.LeaseDuration,
			RenewDeadline:   t.RenewDeadline,
			RetryPeriod:     t.RetryPeriod,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(lctx context.Context) {
					working.Lock()
					defer working.Unlock()
					if lctx.Err() != nil {
						return
					}
					e.leading.Store(true)
					defer e.leading.Store(false)
					e.log.Info("leading the reclaim loop", "lease", e.namespace+"/"+e.name, "identity", e.identity)
					work(lctx)
				},
				OnStoppedLeading: func() {
					if ctx.Err() == nil {
						e.log.Warn("lost the reclaim leadership", "identity", e.identity)
					}
				},
				OnNewLeader: func(id string) {
					if id != e.identity {
						e.log.Info("reclaim leader", "identity", id)
						if e.newLeader != nil {
							go e.newLeader(ctx, id)
						}
					}
				},
			},
		})
		if err != nil {
			e.log.Error("reclaim leader election", "err", err)
			return
		}
		le.Run(ctx)
		working.Lock()
		//lint:ignore SA2001 a barrier: the loop has stopped before anyone else may lead
		working.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(t.RetryPeriod):
		}
	}
}

// runReclaimer runs the reclaim loop until ctx ends: always with the local
// backend (one process), only while leading with the kube backend.
func (m *Main) runReclaimer(ctx context.Context) {
	work := func(ctx context.Context) { m.svc.RunReclaimer(ctx, m.Config.Claims.ReclaimEvery) }
	if m.kube == nil {
		m.leading.Store(true)
		defer m.leading.Store(false)
		work(ctx)
		return
	}
	e := &elector{client: m.kube, namespace: m.Config.Kube.Namespace, name: ReclaimerLease, identity: m.identity,
		timing: m.Config.Kube.Leader, log: m.Log, leading: &m.leading,
		labels: map[string]string{LabelTokenKey: m.handler.TokenKeyID()}, newLeader: m.compareTokenKey}
	e.run(ctx, work)
}

// Leading reports whether this portal runs the reclaim loop now.
func (m *Main) Leading() bool { return m.leading.Load() }
