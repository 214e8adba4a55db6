package portal

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// The backends CORRAL_VDI_BACKEND names.
const (
	BackendLocal = "local"
	BackendKube  = "kube"
)

// Where a pod finds its ServiceAccount's namespace.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// defaultNamespace is the pod's own namespace in a cluster, else "default".
func defaultNamespace() string {
	if b, err := os.ReadFile(inClusterNamespaceFile); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

// inCluster reports whether the portal runs in a pod with a ServiceAccount.
func inCluster(getenv func(string) string) bool {
	if getenv("KUBERNETES_SERVICE_HOST") == "" || getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/token")
	return err == nil
}

// resolveBackend settles c.Backend and c.Kubeconfig: an explicit kubeconfig
// first, then the in-cluster config in a pod, then ~/.kube/config. Without
// any, the default backend is local and asking for kube is an error.
func resolveBackend(c *Config, getenv func(string) string) error {
	found := false
	switch {
	case c.Kube.Kubeconfig != "":
		for _, p := range filepath.SplitList(c.Kube.Kubeconfig) {
			if _, err := os.Stat(p); err == nil {
				found = true
			}
		}
		if !found && c.Server.Backend != BackendLocal {
			return fmt.Errorf("KUBECONFIG: %s does not exist", c.Kube.Kubeconfig)
		}
	case inCluster(getenv):
		found = true
	default:
		home := getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		if p := filepath.Join(home, ".kube", "config"); home != "" {
			if _, err := os.Stat(p); err == nil {
				c.Kube.Kubeconfig, found = p, true
			}
		}
	}
	switch c.Server.Backend {
	case "":
		c.Server.Backend = BackendLocal
		if found {
			c.Server.Backend = BackendKube
		}
	case BackendLocal:
	case BackendKube:
		if !found {
			return errors.New("CORRAL_VDI_BACKEND=kube but no cluster config found: not in a pod, KUBECONFIG unset and no ~/.kube/config (set KUBECONFIG or --kubeconfig)")
		}
	default:
		return fmt.Errorf("CORRAL_VDI_BACKEND: %q is not a backend (use local or kube)", c.Server.Backend)
	}
	return nil
}

// refillDelay is how long a pool's warm standby waits after a claim
// before it starts the next member: vdi's default (vdi.DefaultRefillDelay)
// where desktops start on this machine and would share its cores with
// the one just handed out; none on Kubernetes, whose desktops start on
// the cluster's nodes. There the wait emptied a standby sized to a
// morning's arrivals within it (16 claims a second, a standby of 3
// refilled every 2 s), and nine claims in ten started their member
// themselves (docs/reliability.md, the storm).
func refillDelay(backend string) time.Duration {
	if backend == BackendKube {
		return -1 // at the claim's event
	}
	return 0 // vdi's default
}

// restConfig is the cluster access of the kube backend: kubeconfig when
// set, else the in-cluster config.
func restConfig(kubeconfig string, qps int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig == "" {
		cfg, err = rest.InClusterConfig()
	} else {
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: filepath.SplitList(kubeconfig)}
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("kube backend: cluster config: %w", err)
	}
	// client-go's own limit (5 requests/s) would cap a replica at well under
	// one claim a second, and 50 capped three replicas at 12 claim or
	// release operations a second in the soak's storm with the machine
	// idle: a claim with its power-on is about a dozen requests. The
	// apiserver protects itself (API Priority and Fairness), so the client
	// only guards against a runaway loop.
	if cfg.QPS == 0 && qps > 0 {
		cfg.QPS, cfg.Burst = float32(qps), 2*qps
	}
	// The API server gzips what it sends a client that accepts it, its
	// watches' events too, each a block of its own: in a morning storm a
	// tenth of the portals' CPU went to inflating their caches' events,
	// and the API server's to deflating them, for a portal that runs
	// beside it in the cluster.
	cfg.DisableCompression = true
	kube.ReportUnreachable(cfg)
	return cfg, nil
}

// The kube backend's apiserver paths are handlers' console paths.
var (
	_ console.Path = (*kube.SubresourcePath)(nil)
	_ console.Path = (*kube.ExecPath)(nil)
)

// openKube connects the kube backend: KubeVirt VM pools and CT pools (Pods
// declared by ConfigMaps) in every namespace, and claims in Leases, cached
// by a watch that runs until Close. It adds the backend's fallback console
// paths to m.consolePaths.
func (m *Main) openKube(ctx context.Context) (vdi.Backend, vdi.Leases, error) {
	cfg, err := restConfig(m.Config.Kube.Kubeconfig, m.Config.Kube.QPS)
	if err != nil {
		return nil, nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("kube backend: %w", err)
	}
	if err := checkRBAC(ctx, cs, m.Config.Kube.Namespace, m.Config.Kube.PoolNamespaces); err != nil {
		return nil, nil, err
	}
	// The backend's Dial is the direct path (a VMI's or Pod's IP); the
	// apiserver's KubeVirt subresources and pods/exec reach consoles when
	// it cannot.
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: cfg})
	if err != nil {
		return nil, nil, err
	}
	execPath, err := kube.NewExecPath(kube.Config{REST: cfg})
	if err != nil {
		return nil, nil, err
	}
	kctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	backend, leases, err := m.kubeBackend(ctx, kctx, cfg, cs)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	m.kube, m.stopKube = cs, cancel
	m.apiserver.cs = cs
	go m.apiserver.watch(kctx)
	m.consolePaths = append(m.consolePaths, apiserver, execPath)
	m.usb = apiserver
	m.identity = newIdentity()
	m.Log.Info("kube backend", "host", cfg.Host, "namespace", m.Config.Kube.Namespace, "identity", m.identity, "poolNamespaces", strings.Join(m.Config.Kube.PoolNamespaces, ","))
	return backend, leases, nil
}

// kubeBackend makes the kube backend and its claim store: over every
// namespace in the cluster-wide mode, else one of each per pool namespace
// behind a router that refuses any other namespace. The Lease caches fill
// before it returns and run until kctx ends.
func (m *Main) kubeBackend(ctx, kctx context.Context, cfg *rest.Config, cs kubernetes.Interface) (vdi.Backend, vdi.Leases, error) {
	start := func(ns string) (*kube.Leases, error) {
		l := kube.NewLeases(kube.LeasesConfig{Client: cs, Namespace: ns, Log: m.Log})
		startErr := make(chan error, 1)
		go func() { startErr <- l.Start(kctx) }()
		select {
		case err := <-startErr:
			return l, err
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	names := m.Config.Kube.PoolNamespaces
	if len(names) == 0 {
		leases, err := start("")
		if err != nil {
			return nil, nil, err
		}
		backend, err := kube.NewCluster(kube.Config{REST: cfg, Leases: leases})
		if err != nil {
			return nil, nil, err
		}
		m.caches.start(kctx, backend, m.Log)
		return backend, leases, nil
	}
	backend := &namespacedBackend{names: names, by: map[string]namespaceBackend{}}
	// Claim locks are in the portal's namespace: written and read by name,
	// never listed, so that store is not started (no watch there).
	leases := &namespacedLeases{names: names, by: map[string]vdi.Leases{}, lockNS: m.Config.Kube.Namespace,
		lockStore: kube.NewLeases(kube.LeasesConfig{Client: cs, Namespace: m.Config.Kube.Namespace, Log: m.Log})}
	for _, ns := range names {
		l, err := start(ns)
		if err != nil {
			return nil, nil, err
		}
		c, err := kube.NewCluster(kube.Config{REST: cfg, Namespace: ns, Leases: l})
		if err != nil {
			return nil, nil, err
		}
		m.caches.start(kctx, c, m.Log)
		backend.by[ns], leases.by[ns] = c, l
	}
	return backend, leases, nil
}
