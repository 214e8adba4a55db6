package kube_test

import (
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// BenchmarkKubeClaim is the claim storm on the real apiserver through three
// portal instances (own clients and caches): 200 members claimed by 1, 100
// and 200 claimants at once, p99 against the limit the single claimant
// sets in the same run. Run with a fixed count, e.g. -benchtime 400x: every
// claim leaves a Lease.
func BenchmarkKubeClaim(b *testing.B) {
	c := testcluster.Shared(b)
	leasetest.BenchStorm(b, func(tb testing.TB) leasetest.Store { return kubeStore(tb, c, c.Config) }, 200, 3)
}

// BenchmarkKubeMorning is the morning storm on the real apiserver through
// three portal instances, in process: 1,000 users arriving over 60 s, each
// claiming once (leasetest.BenchMorning; the soak's storm runs it through
// the portal binary).
func BenchmarkKubeMorning(b *testing.B) {
	c := testcluster.Shared(b)
	leasetest.BenchMorning(b, kubeStore(b, c, c.Config), 1000, time.Minute, 3)
}

// BenchmarkKubeOneUser is one user's 50 claims at once through three
// portal instances on the real apiserver (leasetest.BenchOneUser): her
// claims wait their turns at her claim lock. Run with -benchtime 100x.
func BenchmarkKubeOneUser(b *testing.B) {
	c := testcluster.Shared(b)
	leasetest.BenchOneUser(b, kubeStore(b, c, c.Config), 50, 3)
}
