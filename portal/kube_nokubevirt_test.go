package portal

import (
	"context"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
)

// TestKubeWithoutKubeVirt: on a cluster without KubeVirt (this package's
// never installs it) the Kubernetes backend has just no VM pools: listing
// pools and the reclaim loop's repair of pool definitions succeed with
// nothing to do, rather than failing every 10 s on a resource the API
// server does not serve.
func TestKubeWithoutKubeVirt(t *testing.T) {
	c := testcluster.Shared(t)
	c.Apply(t, "../deploy/rbac.yaml")
	back, err := kube.NewCluster(kube.Config{REST: c.PortalServiceAccount(t), Namespace: c.Namespace(t)})
	if err != nil {
		t.Fatal(err)
	}
	back.FillWait = 10 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := back.StartCaches(ctx); err != nil {
		t.Fatalf("StartCaches without KubeVirt: %v; want the VM cache to wait for KubeVirt quietly", err)
	}
	if pools, err := back.Pools(ctx); err != nil || len(pools) != 0 {
		t.Errorf("Pools without KubeVirt: %d pools, %v; want none and no error", len(pools), err)
	}
	if n, err := back.RepairDefinitions(ctx); err != nil || n != 0 {
		t.Errorf("RepairDefinitions without KubeVirt: %d, %v; want 0 and no error (nothing to repair)", n, err)
	}
}
