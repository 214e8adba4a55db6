package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// BenchmarkKubeCTMembers reads a 1,000-member CT pool's members from the
// caches with every member's Pod there, as at a morning's end: what every
// claim of the pool asks its backend for.
func BenchmarkKubeCTMembers(b *testing.B) {
	const members = 1000
	c := testcluster.Shared(b)
	ctx := context.Background()
	ns := c.Namespace(b)
	back, _ := mustCachedCluster(b, kube.Config{REST: c.Config, Leases: mustLeases(b, c.Config), Namespace: ns})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: kube.CTConfigMapName("big"), Labels: map[string]string{kube.LabelCTPool: "big"}},
		Data: map[string]string{kube.CTKeyImage: "debian:12", kube.CTKeySize: fmt.Sprint(members)}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := 1; i <= members; i++ {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("big-%d", i), Labels: map[string]string{vdi.LabelPool: "big"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "desktop", Image: "debian:12"}}}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	stopped := func() int {
		ms, err := back.Members(ctx, ns, "big")
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, m := range ms {
			if m.Power == vdi.PowerStopped {
				n++
			}
		}
		return n
	}
	eventually(b, time.Minute, func() string {
		if n := stopped(); n > 0 {
			return fmt.Sprintf("%d members without their Pod in the cache yet", n)
		}
		return ""
	})
	// A list of them all (pages, the standby), and the walk a claim
	// ranks them in (vdi.MemberWalker).
	b.Run("Members", func(b *testing.B) {
		for b.Loop() {
			if _, err := back.Members(ctx, ns, "big"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("WalkMembers", func(b *testing.B) {
		for b.Loop() {
			if err := back.WalkMembers(ctx, ns, "big", func(vdi.Member) bool { return true }); err != nil {
				b.Fatal(err)
			}
		}
	})
}
