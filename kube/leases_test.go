package kube_test

import (
	"context"
	"os"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

func TestMain(m *testing.M) {
	leasetest.MaybeChildSharded(openKubeconfig, kubeShards)
	maybeServePortal()
	os.Exit(testcluster.Main(m))
}

// openKubeconfig opens Leases as a portal with that kubeconfig does: its
// own client and its own cache of every namespace's Leases.
func openKubeconfig(ctx context.Context, path string) (vdi.Leases, func(), error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, nil, err
	}
	return openConfig(ctx, cfg)
}

func openConfig(ctx context.Context, cfg *rest.Config) (vdi.Leases, func(), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // a race of hundreds of claimants, not of the client's rate limiter
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	leases := kube.NewLeases(kube.LeasesConfig{Client: cs})
	if err := leases.Start(ctx); err != nil {
		cancel()
		return nil, nil, err
	}
	return leases, cancel, nil
}

// kubeStore returns a fresh namespace on the shared cluster whose clients
// authenticate with cfg.
func kubeStore(t testing.TB, c *testcluster.Cluster, cfg *rest.Config) leasetest.Store {
	ns := c.Namespace(t)
	return leasetest.Store{
		Namespace: ns,
		Child:     testcluster.WriteKubeconfig(t, cfg),
		Open:      func(tb testing.TB) vdi.Leases { return mustLeases(tb, cfg) },
		Replicas:  func(tb testing.TB, name string) vdi.Replicas { return runHeartbeat(tb, cfg, ns, name) },
	}
}

// runHeartbeat keeps the heartbeat of a replica named name in namespace
// ns, as a portal's kube.ScreenOwners does, until tb ends.
func runHeartbeat(tb testing.TB, cfg *rest.Config, ns, name string) *kube.ScreenOwners {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	o := kube.NewScreenOwners(kube.ScreenOwnersConfig{Client: cs, Namespace: ns, Identity: name})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		o.Run(ctx)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
	return o
}

// mustLeases opens Leases as cfg, closed when tb ends, when it also checks
// that no caller changed a Lease List shared.
func mustLeases(tb testing.TB, cfg *rest.Config) vdi.Leases {
	tb.Helper()
	leases, closeFn, err := openConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(closeFn)
	tb.Cleanup(func() {
		if err := kube.ListedUnchanged(leases); err != nil {
			tb.Error(err)
		}
	})
	return leases
}
