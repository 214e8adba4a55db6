package kube_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// ctPoolConfigMap declares CT pool name in ns, as an admin would.
func ctPoolConfigMap(t *testing.T, c *testcluster.Cluster, ns, name string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-" + name, Labels: map[string]string{kube.LabelCTPool: name}},
		Data: map[string]string{kube.CTKeyImage: "debian:12", kube.CTKeySize: "1"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// eventually retries check until it returns "" or within ends; it fails
// with check's last word.
func eventually(t testing.TB, within time.Duration, check func() string) {
	t.Helper()
	var last string
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if last = check(); last == "" {
			return
		}
	}
	t.Fatalf("after %v: %s", within, last)
}

// poolNames returns the names of b's pools in ns.
func poolNames(t *testing.T, b vdi.Backend, ns string) (string, error) {
	t.Helper()
	pools, err := b.Pools(context.Background())
	if err != nil {
		return "", err
	}
	var out []string
	for _, p := range pools {
		if p.Namespace == ns {
			out = append(out, p.Name)
		}
	}
	return strings.Join(out, ","), nil
}

// TestCachesRecover breaks the backend's watches as a network, an API
// server and RBAC would: while a cache cannot follow, reads go to the API
// server and Health says which cache and why; once it can again it catches
// up (relists with backoff) and reads cost no request again. The backend's
// own writes are read back at once, before the cache shows them.
func TestCachesRecover(t *testing.T) {
	c := testcluster.Shared(t)
	c.Apply(t, "../deploy/rbac.yaml")
	sa := c.PortalServiceAccount(t)

	t.Run("WatchBreaks", func(t *testing.T) {
		ns := c.Namespace(t)
		host, err := url.Parse(sa.Host)
		if err != nil {
			t.Fatal(err)
		}
		net := newLink(t, host.Host)
		cfg := rest.CopyConfig(sa)
		cfg.Host = "https://" + net.addr
		cfg.Timeout = 5 * time.Second
		counter := countRequests(cfg)
		back, _ := mustCachedCluster(t, kube.Config{REST: cfg, Namespace: ns})
		ctPoolConfigMap(t, c, ns, "before")
		eventually(t, 10*time.Second, func() string {
			if got, err := poolNames(t, back, ns); got != "before" {
				return "pools " + got + "; want before, from the watch (" + errText(err) + ")"
			}
			return ""
		})
		n := counter.total()
		if _, err := poolNames(t, back, ns); err != nil || counter.total() != n {
			t.Errorf("Pools from a filled cache: %d requests, %v; want 0", counter.total()-n, err)
		}

		net.cut()
		eventually(t, 20*time.Second, func() string {
			if err := back.Health(); err == nil || !strings.Contains(err.Error(), "broken") {
				return "Health with the API server out of reach: " + errText(err) + "; want the broken watch named"
			}
			return ""
		})
		if _, err := poolNames(t, back, ns); err == nil {
			t.Errorf("Pools with the API server out of reach and the cache broken: nil error; want the API server's (no stale answer)")
		}
		ctPoolConfigMap(t, c, ns, "during")

		net.mend(t)
		// The reflector's backoff is at most 30 s.
		eventually(t, 45*time.Second, func() string {
			if err := back.Health(); err != nil {
				return "Health after the API server is back: " + err.Error()
			}
			return ""
		})
		eventually(t, 10*time.Second, func() string {
			if got, err := poolNames(t, back, ns); got != "before,during" {
				return "pools after the relist: " + got + "; want before,during (" + errText(err) + ")"
			}
			return ""
		})
		n = counter.total()
		if _, err := poolNames(t, back, ns); err != nil || counter.total() != n {
			t.Errorf("Pools after the cache recovered: %d requests, %v; want 0", counter.total()-n, err)
		}
	})

	t.Run("NamespaceNotWatchable", func(t *testing.T) {
		ns := c.Namespace(t)
		ctPoolConfigMap(t, c, ns, "shell")
		// A user bound to nothing yet: the portal's role is not in ns.
		cfg := c.User(t, "cache-"+ns)
		back, err := kube.NewCluster(kube.Config{REST: cfg, Namespace: ns})
		if err != nil {
			t.Fatal(err)
		}
		back.FillWait = 2 * time.Second
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err = back.StartCaches(ctx)
		if err == nil || !strings.Contains(err.Error(), "forbidden") || !strings.Contains(err.Error(), "keeps trying") {
			t.Errorf("StartCaches where the portal may not list: %v; want an error naming the refusal and that it keeps trying", err)
		}
		if err := back.Health(); err == nil || !strings.Contains(err.Error(), "has not filled") || !strings.Contains(err.Error(), ns) {
			t.Errorf("Health where the portal may not list: %v; want the unfilled cache and its namespace named", err)
		}
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "portal"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "corral-vdi-portal"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "cache-" + ns}}}
		if _, err := c.Client.RbacV1().RoleBindings(ns).Create(context.Background(), rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 45*time.Second, func() string {
			if err := back.Health(); err != nil {
				return "Health once the portal may list: " + err.Error()
			}
			return ""
		})
		if got, err := poolNames(t, back, ns); got != "shell" {
			t.Errorf("pools once the cache filled: %q, %v; want shell", got, err)
		}
	})

	t.Run("OwnWritesReadBack", func(t *testing.T) {
		ns := c.Namespace(t)
		ctPoolConfigMap(t, c, ns, "shell")
		back, ctx := mustCachedCluster(t, kube.Config{REST: sa, Namespace: ns})
		eventually(t, 10*time.Second, func() string {
			if got, _ := poolNames(t, back, ns); got != "shell" {
				return "pools " + got + "; want shell"
			}
			return ""
		})
		for i := 1; i <= 5; i++ {
			want := time.Duration(i) * time.Minute
			if err := back.SetPolicy(ctx, ns, "shell", vdi.Policy{DisconnectGrace: want}); err != nil {
				t.Fatal(err)
			}
			p, err := back.Pool(ctx, ns, "shell")
			if err != nil || p.Policy.DisconnectGrace != want {
				t.Fatalf("Pool right after SetPolicy(grace %v): grace %v, %v; want the policy just written", want, p.Policy.DisconnectGrace, err)
			}
		}
	})

	// The watch often shows a write before its answer reaches the writer
	// (the storm's PATCH of its standby): the cache already shows it, so
	// reads stay on the cache, where every read of the namespace went to
	// the API server for the next 30 s (a storm's replica listing its
	// pool's ConfigMap for each claim: tails of hundreds of ms).
	t.Run("OwnWriteTheCacheShowedFirst", func(t *testing.T) {
		ns := c.Namespace(t)
		ctPoolConfigMap(t, c, ns, "shell")
		cfg := rest.CopyConfig(sa)
		var back *kube.Cluster
		var answered atomic.Bool // the write's answer held until the cache shows the write
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(r *http.Request) (*http.Response, error) {
				res, err := rt.RoundTrip(r)
				if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/configmaps/") && err == nil && !answered.Swap(true) {
					eventually(t, 10*time.Second, func() string {
						p, err := back.Pool(r.Context(), ns, "shell")
						if err != nil || p.Policy.DisconnectGrace != time.Hour {
							return fmt.Sprintf("the cache shows grace %v, %v; want the 1h just written", p.Policy.DisconnectGrace, err)
						}
						return ""
					})
				}
				return res, err
			})
		}
		counter := countRequests(cfg)
		var ctx context.Context
		back, ctx = mustCachedCluster(t, kube.Config{REST: cfg, Namespace: ns})
		eventually(t, 10*time.Second, func() string {
			if got, _ := poolNames(t, back, ns); got != "shell" {
				return "pools " + got + "; want shell"
			}
			return ""
		})
		if err := back.SetPolicy(ctx, ns, "shell", vdi.Policy{DisconnectGrace: time.Hour}); err != nil {
			t.Fatal(err)
		}
		n := counter.total()
		for range 5 {
			if p, err := back.Pool(ctx, ns, "shell"); err != nil || p.Policy.DisconnectGrace != time.Hour {
				t.Fatalf("Pool after SetPolicy(grace 1h): grace %v, %v; want the policy just written", p.Policy.DisconnectGrace, err)
			}
		}
		if got := counter.total() - n; got != 0 {
			t.Errorf("5 reads of the pool after a write the cache showed before its answer: %d API-server requests; want 0", got)
		}
	})
}

// mustCachedCluster is a kube backend of cfg with its caches started,
// and the context they run in, cancelled when t ends.
func mustCachedCluster(t testing.TB, cfg kube.Config) (*kube.Cluster, context.Context) {
	t.Helper()
	back, err := kube.NewCluster(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := back.StartCaches(ctx); err != nil {
		t.Fatal(err)
	}
	return back, ctx
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}

// TestPageFloodCostsNothing is the attacker's row of the caches: a user
// reloading the home page (their desktops and the pools) and an admin
// reloading the dashboard in a loop send the API server no request at all
// once the caches are filled, however fast they click.
func TestPageFloodCostsNothing(t *testing.T) {
	c := testcluster.Shared(t)
	c.Apply(t, "../deploy/rbac.yaml")
	ns := c.Namespace(t)
	ctPoolConfigMap(t, c, ns, "shell")
	cfg := rest.CopyConfig(c.PortalServiceAccount(t))
	counter := countRequests(cfg)
	leases := mustLeases(t, cfg)
	back, ctx := mustCachedCluster(t, kube.Config{REST: cfg, Leases: leases})
	svc := newService(back, leases)
	alice, root := vdi.Identity{Login: "alice"}, vdi.Identity{Login: "root", Admin: true}
	eventually(t, 10*time.Second, func() string {
		if got, _ := poolNames(t, back, ns); got != "shell" {
			return "pools " + got + "; want shell"
		}
		return ""
	})
	n := counter.total()
	for range 200 {
		if _, err := svc.Desktops(ctx, alice, false); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Pools(ctx, alice); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.Dashboard(ctx, root); err != nil {
			t.Fatal(err)
		}
	}
	if got := counter.total() - n; got != 0 {
		t.Errorf("200 home pages and dashboards sent %d API-server requests; want 0", got)
	}
}

// TestCachesAfterAPIServerRestart stops the API server for a few seconds
// (a cluster of its own): the watches break and Health says so; once it
// is back the caches relist (or resume) with backoff, show what changed,
// and serve reads again without a request.
func TestCachesAfterAPIServerRestart(t *testing.T) {
	c := testcluster.MustStart(t)
	c.Apply(t, "../deploy/rbac.yaml")
	ns := c.Namespace(t)
	ctPoolConfigMap(t, c, ns, "before")
	cfg := rest.CopyConfig(c.PortalServiceAccount(t))
	cfg.Timeout = 5 * time.Second
	counter := countRequests(cfg)
	back, ctx := mustCachedCluster(t, kube.Config{REST: cfg, Namespace: ns})
	restarted := make(chan error, 1)
	go func() { restarted <- c.RestartAPIServer(4 * time.Second) }()
	eventually(t, 10*time.Second, func() string {
		if err := back.Health(); err == nil {
			return "Health while the API server is down: no error; want the broken watch named"
		}
		return ""
	})
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-after", Labels: map[string]string{kube.LabelCTPool: "after"}},
		Data: map[string]string{kube.CTKeyImage: "debian:12", kube.CTKeySize: "1"}}
	eventually(t, 30*time.Second, func() string {
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return "create a pool once the API server is back: " + err.Error()
		}
		return ""
	})
	eventually(t, 45*time.Second, func() string {
		if err := back.Health(); err != nil {
			return "Health after the restart: " + err.Error()
		}
		if got, err := poolNames(t, back, ns); got != "after,before" {
			return "pools after the restart: " + got + "; want after,before (" + errText(err) + ")"
		}
		return ""
	})
	n := counter.total()
	if _, err := poolNames(t, back, ns); err != nil || counter.total() != n {
		t.Errorf("Pools after the restart: %d requests, %v; want 0 from the cache", counter.total()-n, err)
	}
}
