package kube_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestPoolAccess keeps who may use a pool with the pool on the real
// apiserver, for both kinds: a CT pool's ConfigMap and every member VM of
// a VM pool carry it, every reader sees it, PATCH-like changes apply to
// the next claim at once, and members a resize adds carry it too.
func TestPoolAccess(t *testing.T) {
	s := newCTSetup(t)
	ctx, ns := s.ctx, s.ns
	s.c.StartKubeVirtStandIn(t)
	testcluster.StoppedVM(t, s.c.AdminClient(t), ns, "golden", nil)
	root := vdi.Identity{Login: "root", Admin: true}
	finance := vdi.Access{Groups: []string{"finance"}}
	alice := vdi.Identity{Login: "alice", Groups: []string{"finance"}}
	bob := vdi.Identity{Login: "bob"}

	for _, kind := range []vdi.Kind{vdi.KindCT, vdi.KindVM} {
		t.Run(string(kind), func(t *testing.T) {
			name, source := "fin-"+string(kind), "corral.test/shell"
			if kind == vdi.KindVM {
				source = "golden"
			}
			p := vdi.Pool{Namespace: ns, Name: name, Kind: kind, Mode: vdi.ModePersistent, Source: source, Size: 1,
				Access: finance, Limits: vdi.Limits{DesktopsPerUser: 1}}
			if err := s.svc.CreatePool(ctx, root, p); err != nil {
				t.Fatalf("create: %v", err)
			}
			got, err := s.back.Pool(ctx, ns, name)
			if err != nil || strings.Join(got.Access.Groups, ",") != "finance" || got.Limits.DesktopsPerUser != 1 {
				t.Fatalf("pool read back: %+v, %v; want access for finance and 1 per user", got, err)
			}
			if _, err := s.svc.Claim(ctx, bob, ns, name); vdi.ErrorCode(err) != vdi.EForbidden {
				t.Errorf("bob's claim: %v; want EForbidden", err)
			}
			if d, err := s.svc.Claim(ctx, alice, ns, name); err != nil || d.Holder != "alice" {
				t.Errorf("alice's claim: %+v, %v; want her desktop", d, err)
			}
			open := vdi.Access{Users: []string{"bob"}, Groups: []string{"finance"}}
			if err := s.svc.UpdatePool(ctx, root, ns, name, vdi.PoolUpdate{Access: &open}); err != nil {
				t.Fatalf("widen: %v", err)
			}
			two := 2
			if err := s.svc.UpdatePool(ctx, root, ns, name, vdi.PoolUpdate{Size: &two}); err != nil {
				t.Fatalf("grow: %v", err)
			}
			if kind == vdi.KindVM { // each member VM carries it, the one the resize added too
				for _, m := range memberNames(t, s.back, ns, name) {
					var vm kubevirtv1.VirtualMachine
					err := s.c.AdminClient(t).Get(ctx, client.ObjectKey{Namespace: ns, Name: m}, &vm)
					if err != nil || !strings.Contains(vm.Annotations[kube.AnnotationAccess], `"bob"`) {
						t.Errorf("member %s's %s = %q, %v; want bob in it", m, kube.AnnotationAccess, vm.Annotations[kube.AnnotationAccess], err)
					}
				}
			}
			if d, err := s.svc.Claim(ctx, bob, ns, name); err != nil || d.Holder != "bob" {
				t.Errorf("bob's claim after widening: %+v, %v; want his desktop", d, err)
			}
		})
	}

	t.Run("HandEditedConfigMap", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-bad", Labels: map[string]string{kube.LabelCTPool: "bad"}},
			Data: map[string]string{kube.CTKeyImage: "corral.test/shell", kube.CTKeyAccess: "{not json"}}
		if _, err := s.c.Client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := s.back.Pool(ctx, ns, "bad")
		if err == nil || !strings.Contains(err.Error(), kube.CTKeyAccess) {
			t.Errorf("pool with a broken access key: %v; want an error naming the key", err)
		}
	})
}
