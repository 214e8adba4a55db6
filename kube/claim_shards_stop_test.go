package kube_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestClaimsByShard_StopSaysOnce: a replica that stops while its pass
// renews its shards (here, as its first renewal is about to be sent)
// gives every shard up and says so once, at Info: where its pass went on
// with the stopped context, every renewal failed and logged "claim shard
// not renewed … context canceled", then each shard logged its let-go,
// at every SIGTERM.
func TestClaimsByShard_StopSaysOnce(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	v := newView("r0")
	f := newShardFleet(t, ns, leasetest.NewPool(ns, "p", 2, 2), 0)
	leases := &stopOnRenewal{Leases: mustLeases(t, c.Config)}
	f.start("r0", leases, v)
	waitShards(t, c, ns, "r0")
	leases.arm(func() { f.stop("r0") })
	f.waitLogged(t, "claim shards given up", 1)
	if left, err := mustLeases(t, c.Config).List(context.Background(), ns, vdi.ShardPool); err != nil || len(left) != 0 {
		t.Errorf("the claim shards after r0 stopped: %s, %v; want none left, each deleted as it was given up", shardHolders(t, c, ns), err)
	}
	log := f.logs.String()
	for _, noise := range []string{`msg="claim shard not renewed`, `msg="claim shard let go"`, `msg="claim shards not let go`} {
		if n := strings.Count(log, noise); n != 0 {
			t.Errorf("r0's stop logged %s %d times; want none", noise, n)
		}
	}
	if n := strings.Count(log, `msg="claim shards given up`); n != 1 || !strings.Contains(log, "shards=\"[0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15]\"") {
		t.Errorf("r0's stop said it gave its shards up %d times, naming %s; want once, naming all %d", n, lastLine(log, "claim shards given up"), vdi.DefaultShardCount)
	}
}

// stopOnRenewal calls then, once armed, as its next renewal of a claim
// shard is about to be sent, and sends it with the context it was given.
type stopOnRenewal struct {
	vdi.Leases
	mu   sync.Mutex
	then func()
}

func (s *stopOnRenewal) arm(then func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.then = then
}

func (s *stopOnRenewal) Update(ctx context.Context, l *vdi.Lease) (*vdi.Lease, error) {
	if l.Pool == vdi.ShardPool {
		s.mu.Lock()
		then := s.then
		s.then = nil
		s.mu.Unlock()
		if then != nil {
			then()
		}
	}
	return s.Leases.Update(ctx, l)
}

// lastLine returns the last line of log that holds msg, "" for none.
func lastLine(log, msg string) string {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], msg) {
			return lines[i]
		}
	}
	return ""
}
