package kube_test

import (
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// BenchmarkKubeClaim measures claims on the real apiserver through three
// portal instances (own clients and caches): one claim at a time, then
// 100 and 500 at once.
// Run with a fixed count, e.g. -benchtime 500x: every claim leaves a Lease.
func BenchmarkKubeClaim(b *testing.B) {
	c := testcluster.Shared(b)
	b.Run("members=100/claimants=1", func(b *testing.B) { leasetest.Bench(b, kubeStore(b, c, c.Config), 100, 1, 3) })
	b.Run("members=100/claimants=100", func(b *testing.B) { leasetest.Bench(b, kubeStore(b, c, c.Config), 100, 100, 3) })
	b.Run("members=100/claimants=500", func(b *testing.B) { leasetest.Bench(b, kubeStore(b, c, c.Config), 100, 500, 3) })
}
