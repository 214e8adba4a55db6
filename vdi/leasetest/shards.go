package leasetest

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A store whose portals run claims by shard (vdi.ShardConfig) runs the
// suite's child portals so: each child keeps a heartbeat of its own
// (its view of the live replicas), serves the claims other children
// forward to it, and forwards its own, as a portal's replicas do.

// Sharder sets claims by shard up in a child portal on the store that
// child names, with namespace ns as the lock namespace: it returns the
// child's view of the live replicas, its shard config and serve, which
// serves the claims forwarded to svc and keeps svc's shards until the
// stop function it returns is called (which lets them go).
type Sharder func(ctx context.Context, child, ns string) (vdi.Replicas, *vdi.ShardConfig, func(svc *vdi.Service) (stop func()), error)

// sharder is MaybeChildSharded's, in a child.
var sharder Sharder

// MaybeChildSharded is MaybeChild for a store whose Store.Shards is set:
// shard sets claims by shard up in each child portal.
func MaybeChildSharded(open Opener, shard Sharder) {
	sharder = shard
	MaybeChild(open)
}
