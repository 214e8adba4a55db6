package kube_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// BenchmarkKubeRequests counts the API-server requests the kube backend
// sends, as the portal's ServiceAccount through vdi.Service: per claim of
// a VM and of a CT member, warm (its desktop already runs) and cold (the
// claim starts it), per release, per console open of a VM on the direct
// path (its VMI's address and launcher Pod), and per page view (the home page's
// Desktops and Pools, and the admin dashboard). cache=off reads the API
// server as the backend does before StartCaches; cache=on after it. Both run in
// one process on one cluster, so their figures compare. It also reports
// the API server's CPU time during the claims, per 1,000 claims.
func BenchmarkKubeRequests(b *testing.B) {
	// controller-runtime's warning that it has no logger would land in the
	// middle of a result line.
	ctrllog.SetLogger(logr.Discard())
	c := testcluster.Shared(b)
	c.Apply(b, "../deploy/rbac.yaml")
	c.StartKubeVirtStandIn(b)
	c.StartKubelet(b)
	for _, cached := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%s", onOff(cached)), func(b *testing.B) {
			for _, kind := range []vdi.Kind{vdi.KindVM, vdi.KindCT} {
				for _, warm := range []bool{false, true} {
					b.Run(fmt.Sprintf("kind=%s/warm=%v", kind, warm), func(b *testing.B) {
						benchRequests(b, c, cached, kind, warm)
					})
				}
			}
		})
	}
}

func onOff(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// benchRequests claims, views and releases a member of a fresh
// two-member pool b.N times and reports the mean requests of each.
func benchRequests(b *testing.B, c *testcluster.Cluster, cached bool, kind vdi.Kind, warm bool) {
	ctx := context.Background()
	ns := c.Namespace(b)
	sa := rest.CopyConfig(c.PortalServiceAccount(b))
	counter := countRequests(sa)
	leases := mustLeases(b, sa)
	back, err := kube.NewCluster(kube.Config{REST: sa, Leases: leases})
	if err != nil {
		b.Fatal(err)
	}
	if cached {
		cctx, cancel := context.WithCancel(ctx)
		b.Cleanup(cancel)
		starter, ok := any(back).(interface{ StartCaches(context.Context) error })
		if !ok {
			b.Skip("the backend has no caches yet")
		}
		if err := starter.StartCaches(cctx); err != nil {
			b.Fatal(err)
		}
	}
	svc := newService(back, leases)
	pool := "p"
	switch kind {
	case vdi.KindVM:
		admin := c.AdminClient(b)
		for i := 1; i <= 2; i++ {
			testcluster.StoppedVM(b, admin, ns, fmt.Sprintf("%s-%d", pool, i), map[string]string{vdi.LabelPool: pool})
		}
	case vdi.KindCT:
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-" + pool, Labels: map[string]string{kube.LabelCTPool: pool}},
			Data: map[string]string{kube.CTKeyImage: "debian:12", kube.CTKeySize: "2", kube.CTKeyMode: "persistent"}}
		if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	user := vdi.Identity{Login: "alice"}
	root := vdi.Identity{Login: "root", Admin: true}
	// The first look at a pool fills what a cache would hold: not counted.
	if _, err := svc.Pools(ctx, user); err != nil {
		b.Fatal(err)
	}
	pid, err := c.APIServerPID()
	if err != nil {
		b.Fatal(err)
	}
	var claims, releases, views, dashboards, consoles int
	var cpu time.Duration // the API server's, during claims
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		if warm {
			for j := 1; j <= 2; j++ {
				if err := back.Start(ctx, vdi.Ref{Namespace: ns, Name: fmt.Sprintf("%s-%d", pool, j)}); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StartTimer()
		n, before := counter.total(), processCPU(b, pid)
		d, err := svc.Claim(ctx, user, ns, pool)
		if err != nil {
			b.Fatal(err)
		}
		claims += counter.total() - n
		cpu += processCPU(b, pid) - before
		if kind == vdi.KindVM {
			// The direct path of a console open: the VMI's address, vouched
			// for by its virt-launcher Pod.
			n = counter.total()
			conn, err := back.Dial(ctx, d.Ref(), vdi.ProtocolVNC)
			if err != nil {
				b.Fatal(err)
			}
			consoles += counter.total() - n
			conn.Close()
		}
		n = counter.total()
		if _, err := svc.Desktops(ctx, user, false); err != nil {
			b.Fatal(err)
		}
		if _, err := svc.Pools(ctx, user); err != nil {
			b.Fatal(err)
		}
		views += counter.total() - n
		n = counter.total()
		if _, err := svc.Dashboard(ctx, root); err != nil {
			b.Fatal(err)
		}
		dashboards += counter.total() - n
		n = counter.total()
		if err := svc.Release(ctx, user, d.Ref(), ""); err != nil {
			b.Fatal(err)
		}
		releases += counter.total() - n
	}
	per := func(sum int) float64 { return float64(sum) / float64(b.N) }
	b.ReportMetric(per(claims), "requests/claim")
	b.ReportMetric(per(releases), "requests/release")
	b.ReportMetric(per(views), "requests/page")
	b.ReportMetric(per(dashboards), "requests/dashboard")
	if kind == vdi.KindVM {
		b.ReportMetric(per(consoles), "requests/console-open")
	}
	b.ReportMetric(cpu.Seconds()*1000/float64(b.N), "apiserver-cpu-s/1k-claims")
}

// processCPU returns the user and system CPU time process pid has used
// (/proc/pid/stat, in clock ticks of 10 ms).
func processCPU(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The command may hold spaces: fields count from after its ")".
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
