package portal

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/corral-dev/corral-vdi-portal/kube"
)

// kubeCaches are the kube backend's clusters (one, or one per pool
// namespace) whose watch-fed caches pages and claims read. A cache that
// has not filled or whose watch broke is no outage: reads go to the API
// server meanwhile and it retries with backoff, so /readyz stays 200 and
// says so as "degraded", as the pages do. Its zero value has none.
type kubeCaches struct {
	mu       sync.Mutex
	clusters []*kube.Cluster
	log      *slog.Logger
	last     string // the detail last logged
}

// start fills c's caches, waiting at most kube.CacheFillWait: one that
// does not fill by then keeps trying and is logged here and shown by
// notice.
func (k *kubeCaches) start(ctx context.Context, c *kube.Cluster, log *slog.Logger) {
	if err := c.StartCaches(ctx); err != nil {
		log.Warn("kube caches not filled; reads go to the API server until they are", "err", err)
	}
	k.mu.Lock()
	k.clusters, k.log = append(k.clusters, c), log
	k.mu.Unlock()
}

// notice says, to every user, that a cache does not serve reads; empty
// when all do. Which one and why (an RBAC refusal, say) is for the log,
// once each time it changes.
func (k *kubeCaches) notice() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	for _, c := range k.clusters {
		if err := c.Health(); err != nil {
			errs = append(errs, err)
		}
	}
	detail := ""
	if len(errs) > 0 {
		detail = errors.Join(errs...).Error()
	}
	if detail != k.last && k.log != nil {
		if detail == "" {
			k.log.Info("kube caches serve reads again")
		} else {
			k.log.Warn("kube caches do not serve reads; reads go to the API server", "err", detail)
		}
	}
	k.last = detail
	if detail == "" {
		return ""
	}
	return "The portal's Kubernetes caches are catching up: desktop lists come from the API server meanwhile, so pages may be slower."
}
