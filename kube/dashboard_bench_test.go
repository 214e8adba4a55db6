package kube_test

import (
	"context"
	"fmt"
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

// BenchmarkKubeDashboard builds the admin dashboard (vdi.Service.Dashboard)
// of a 1,000-member CT pool, 50 of them held, from the backend's caches
// as the portal's ServiceAccount, and reports its API-server requests
// (goal 0) beside the time per build.
func BenchmarkKubeDashboard(b *testing.B) {
	ctrllog.SetLogger(logr.Discard())
	const members, held = 1000, 50
	c := testcluster.Shared(b)
	c.Apply(b, "../deploy/rbac.yaml")
	ctx := context.Background()
	ns := c.Namespace(b)
	sa := rest.CopyConfig(c.PortalServiceAccount(b))
	counter := countRequests(sa)
	leases := mustLeases(b, sa)
	back, _ := mustCachedCluster(b, kube.Config{REST: sa, Leases: leases, Namespace: ns})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kube.CTConfigMapName("big"), Labels: map[string]string{kube.LabelCTPool: "big"}},
		Data: map[string]string{kube.CTKeyImage: "debian:12", kube.CTKeySize: fmt.Sprint(members), kube.CTKeyMode: "persistent"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= held; i++ {
		now := time.Now()
		l := &vdi.Lease{Namespace: ns, Member: fmt.Sprintf("big-%d", i), Pool: "big", Holder: fmt.Sprintf("user%d", i),
			AcquireTime: now, RenewTime: now, Duration: time.Hour}
		if _, err := leases.Create(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	svc := newService(back, leases)
	root := vdi.Identity{Login: "root", Admin: true}
	check := func() {
		ds, err := svc.Dashboard(ctx, root)
		if err != nil {
			b.Fatal(err)
		}
		for _, d := range ds {
			if d.Name == "big" && (len(d.Members) != members || d.Claimed != held) {
				b.Fatalf("dashboard of big: %d members, %d claimed; want %d and %d", len(d.Members), d.Claimed, members, held)
			}
		}
	}
	eventually(b, 30*time.Second, func() string {
		ds, err := svc.Dashboard(ctx, root)
		if err != nil || len(ds) == 0 || len(ds[0].Members) != members || ds[0].Claimed != held {
			got := fmt.Sprint(err)
			if len(ds) > 0 {
				got = fmt.Sprintf("%d pools, %s: %d members, %d claimed", len(ds), ds[0].Name, len(ds[0].Members), ds[0].Claimed)
			}
			return "the caches have not shown the pool and its Leases yet: " + got
		}
		return ""
	})
	n := counter.total()
	b.ResetTimer()
	for b.Loop() {
		check()
	}
	b.StopTimer()
	b.ReportMetric(float64(counter.total()-n)/float64(b.N), "requests/dashboard")
}
