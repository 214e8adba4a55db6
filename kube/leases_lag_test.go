package kube_test

import (
	"context"
	"log/slog"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimOfAUserOnALaggingReplica: alice claims on one replica, then
// again on another whose Lease watch has not shown her first claim yet
// (held back). The second claim takes her claim lock after the first let
// it go, and must answer with the desktop she holds, never give her a
// second one: its reads after the lock show her Leases as of every write
// before it (vdi.ReadAfter: read past the cache by their holder label),
// where its cache showed her desktop free and it took another (two tabs
// on two replicas, the watch a few milliseconds late).
func TestClaimOfAUserOnALaggingReplica(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	gate := newWatchGate("/leases")
	defer gate.release()
	cfg := rest.CopyConfig(c.Config)
	cfg.WrapTransport = gate.wrap(cfg.WrapTransport)
	lagging, other := mustLeases(t, cfg), mustLeases(t, c.Config)
	pool := leasetest.NewPool(ns, "lag", 6, 6)
	svc := func(l vdi.Leases) *vdi.Service {
		return vdi.NewService(vdi.Config{Backend: pool, Leases: l, Audit: nopAudit{}, Log: slog.New(slog.DiscardHandler), LockNamespace: ns})
	}
	a, b := svc(other), svc(lagging)
	alice := vdi.Identity{Login: "alice"}
	gate.hold()
	first, err := a.Claim(ctx, alice, ns, "lag")
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Claim(ctx, alice, ns, "lag")
	gate.release()
	if err != nil {
		t.Fatal(err)
	}
	held, _ := mustLeases(t, c.Config).List(ctx, ns, "lag")
	var hers []string
	for _, l := range held {
		if l.Holder == "alice" {
			hers = append(hers, l.Member)
		}
	}
	if second.Name != first.Name || len(hers) != 1 {
		t.Errorf("alice's claims got %s then %s, and she holds %v; want one desktop", first.Name, second.Name, hers)
	}
}
