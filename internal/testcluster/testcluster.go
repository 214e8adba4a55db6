// Package testcluster starts a real kube-apiserver and etcd for tests: the
// binaries scripts/testcluster.sh builds from the Go module proxy, started by
// controller-runtime's envtest with RBAC authorization on. There is no
// kubelet, scheduler or controller-manager: Pods stay Pending and nothing
// garbage-collects, so tests use a fresh namespace each.
//
// A test that needs a cluster fails, never skips, when the binaries are
// missing: `make test` builds them first.
package testcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Versions of the binaries; they name the cache folder, as in
// scripts/testcluster.sh.
const (
	KubeVersion = "v1.37.2"
	EtcdVersion = "3.7.0"
)

// BinDir returns where kube-apiserver and etcd are: KUBEBUILDER_ASSETS when
// set, else the version-keyed cache folder scripts/testcluster.sh fills
// (${CORRAL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/corral-vdi}/kube-<v>-etcd-<v>/bin).
func BinDir() string {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir
	}
	return filepath.Join(CacheRoot(), "kube-"+KubeVersion+"-etcd-"+EtcdVersion, "bin")
}

// CacheRoot is the folder the test tools' builds are cached in:
// ${CORRAL_CACHE:-${XDG_CACHE_HOME:-~/.cache}/corral-vdi}.
func CacheRoot() string {
	if root := os.Getenv("CORRAL_CACHE"); root != "" {
		return root
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "corral-vdi")
}

// Cluster is a running kube-apiserver with its etcd.
type Cluster struct {
	env *envtest.Environment
	// Config authenticates as a cluster admin (group system:masters).
	Config *rest.Config
	// Client is a typed client with Config.
	Client kubernetes.Interface

	mu        sync.Mutex
	standIn   *KubeVirtStandIn
	restarted *exec.Cmd // the apiserver RestartAPIServer started
	reqCA     string    // the request-header CA's folder
}

// Start starts a cluster; callers Stop it.
func Start() (*Cluster, error) {
	// envtest logs through controller-runtime's logger; unset, it prints a
	// stack trace into the test output ("log.SetLogger(...) was never
	// called") that reads like a crash. Its errors come back as errors.
	ctrllog.SetLogger(logr.Discard())
	dir := BinDir()
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return nil, fmt.Errorf("testcluster: %s %s is missing from %s: run scripts/testcluster.sh (or make cluster) to build it once (~6-9 min): %w",
				bin, map[string]string{"kube-apiserver": KubeVersion, "etcd": EtcdVersion}[bin], dir, err)
		}
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory:    dir,
		ControlPlaneStartTimeout: time.Minute, // 2 shared cores: the default 20 s is tight
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	api := env.ControlPlane.GetAPIServer()
	api.Path = filepath.Join(dir, "kube-apiserver")
	args := api.Configure()
	args.Set("authorization-mode", "RBAC")
	// Claims race hundreds of clients against one server; the defaults
	// (400/200 in flight) are sized for real nodes, not a test.
	args.Set("max-requests-inflight", "1000")
	args.Set("max-mutating-requests-inflight", "500")
	// The request-header CA, as a cluster has it for its aggregated APIs:
	// KubeVirt's virt-api refuses to start without it in the
	// extension-apiserver-authentication ConfigMap.
	reqCA, err := requestHeaderCA()
	if err != nil {
		return nil, err
	}
	args.Set("requestheader-client-ca-file", reqCA)
	// The client certificate the apiserver shows aggregated APIs (virt-api
	// believes the identity headers only with it).
	args.Set("proxy-client-cert-file", filepath.Join(filepath.Dir(reqCA), "proxy.crt"))
	args.Set("proxy-client-key-file", filepath.Join(filepath.Dir(reqCA), "proxy.key"))
	args.Set("requestheader-allowed-names", "front-proxy-client")
	args.Set("requestheader-username-headers", "X-Remote-User")
	args.Set("requestheader-group-headers", "X-Remote-Group")
	args.Set("requestheader-extra-headers-prefix", "X-Remote-Extra-")
	cfg, err := env.Start()
	if err != nil {
		os.RemoveAll(filepath.Dir(reqCA))
		return nil, fmt.Errorf("testcluster: start kube-apiserver %s from %s: %w", KubeVersion, dir, err)
	}
	cfg = rest.CopyConfig(cfg)
	unlimit(cfg)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		env.Stop()
		os.RemoveAll(filepath.Dir(reqCA))
		return nil, fmt.Errorf("testcluster: client: %w", err)
	}
	return &Cluster{env: env, Config: cfg, Client: client, reqCA: filepath.Dir(reqCA)}, nil
}

// Stop stops the apiserver and etcd (and the KubeVirt stand-in) and removes
// their data.
func (c *Cluster) Stop() error {
	c.mu.Lock()
	if c.standIn != nil {
		c.standIn.close()
	}
	if c.restarted != nil {
		c.restarted.Process.Signal(syscall.SIGTERM)
		time.Sleep(time.Second)
		c.restarted.Process.Kill()
	}
	c.mu.Unlock()
	defer os.RemoveAll(c.reqCA)
	return c.env.Stop()
}

// MustStart starts a cluster stopped when tb ends; it fails tb when the
// binaries are missing or the cluster does not come up.
func MustStart(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := Start()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Errorf("testcluster: stop: %v", err)
		}
	})
	return c
}

var shared struct {
	sync.Mutex
	c       *Cluster
	err     error
	inMain  bool
	started bool
}

// Main runs a package's tests with one cluster shared by every test that
// calls Shared, started on first use and stopped before the process exits.
// Use it from TestMain: os.Exit(testcluster.Main(m)).
func Main(m *testing.M) int {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		if err := shared.c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "testcluster: stop:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	return code
}

// Shared returns the package's shared cluster, starting it on first use. It
// needs TestMain to call Main, which stops the cluster at the end.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		tb.Fatal("testcluster: Shared needs TestMain to run the tests through testcluster.Main")
	}
	if !shared.started {
		shared.started = true
		shared.c, shared.err = Start()
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.c
}

// Namespace creates a fresh namespace named after the test; nothing deletes
// namespaces here (no controller-manager), so names never repeat.
func (c *Cluster) Namespace(tb testing.TB) string {
	tb.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(tb.Name()))
	name = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return -1
	}, name), "-")
	name = fmt.Sprintf("%.40s-%d", name, nsSeq.next())
	if err := createNamespace(context.Background(), c.Client, name); err != nil {
		tb.Fatal(err)
	}
	return name
}

type counter struct {
	sync.Mutex
	n int
}

func (c *counter) next() int {
	c.Lock()
	defer c.Unlock()
	c.n++
	return c.n
}

var nsSeq counter

// unlimit lifts client-go's default client-side rate limit (5 QPS), which
// would make a race of hundreds of claimants a test of the limiter.
func unlimit(cfg *rest.Config) {
	cfg.QPS = -1
	cfg.Burst = 0
}

func createNamespace(ctx context.Context, cs kubernetes.Interface, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("testcluster: create namespace %s: %w", name, err)
	}
	return nil
}
