package deploytest_test

import (
	"net/netip"
	"path/filepath"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
	"github.com/corral-dev/corral-vdi-portal/internal/netpol"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestPoolNamespaceEgress reads the pool namespace kit's NetworkPolicies as
// a CNI enforces egress (a Pod selected by any Egress policy may reach
// only what one of those policies' rules admits) for the desktop Pods the
// portal and KubeVirt make: no desktop reaches the cloud metadata address,
// the API server (its ClusterIP or a private node address), cluster
// Services or other Pods; an outbound desktop reaches the internet and
// the cluster's DNS only.
func TestPoolNamespaceEgress(t *testing.T) {
	objs, err := deploytest.RenderPoolNamespace(filepath.Join("..", "..", "deploy"), "team-b")
	if err != nil {
		t.Fatal(err)
	}
	var policies []networkingv1.NetworkPolicy
	for _, u := range objs {
		if u.GetKind() != "NetworkPolicy" {
			continue
		}
		var np networkingv1.NetworkPolicy
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &np); err != nil {
			t.Fatal(err)
		}
		policies = append(policies, np)
	}
	ct := labels.Set{vdi.LabelPool: "shell"}
	ctOut := labels.Set{vdi.LabelPool: "shell", kube.LabelEgress: "outbound"}
	vm := labels.Set{"kubevirt.io": "virt-launcher", vdi.LabelPool: "win"}
	vmOut := labels.Set{"kubevirt.io": "virt-launcher", kube.LabelEgress: "outbound"}
	for _, tc := range []struct {
		who  string
		pod  labels.Set
		to   string
		want bool
	}{
		{"ct", ct, "169.254.169.254", false},
		{"ct", ct, "10.96.0.1", false}, // the kubernetes Service
		{"ct", ct, "1.1.1.1", false},
		{"vm", vm, "169.254.169.254", false},
		{"vm", vm, "8.8.8.8", false},
		{"ct outbound", ctOut, "169.254.169.254", false},
		{"ct outbound", ctOut, "10.96.0.1", false},
		{"ct outbound", ctOut, "172.18.0.2", false}, // a kind node's API server
		{"ct outbound", ctOut, "192.168.1.10", false},
		{"ct outbound", ctOut, "100.100.100.100", false},
		{"ct outbound", ctOut, "127.0.0.1", false},
		{"ct outbound", ctOut, "fd00:ec2::254", false}, // AWS metadata over IPv6
		{"ct outbound", ctOut, "fe80::1", false},
		{"ct outbound", ctOut, "1.1.1.1", true},
		{"ct outbound", ctOut, "2606:4700:4700::1111", true},
		{"vm outbound", vmOut, "169.254.169.254", false},
		{"vm outbound", vmOut, "8.8.8.8", true},
	} {
		if got := netpol.AdmitsAddr(policies, tc.pod, netip.MustParseAddr(tc.to)); got != tc.want {
			t.Errorf("%s desktop to %s: allowed %v; want %v", tc.who, tc.to, got, tc.want)
		}
	}
	dns := labels.Set{"k8s-app": "kube-dns"}
	if netpol.AdmitsPod(policies, ct, "kube-system", dns) {
		t.Errorf("a desktop without egress reaches the cluster's DNS; want nothing")
	}
	if !netpol.AdmitsPod(policies, ctOut, "kube-system", dns) {
		t.Errorf("an outbound desktop cannot reach the cluster's DNS; want it to resolve names")
	}
	if netpol.AdmitsPod(policies, ctOut, "corral-vdi", labels.Set{"app.kubernetes.io/name": "corral-vdi-portal"}) {
		t.Errorf("an outbound desktop reaches the portal's Pods; want only DNS in the cluster")
	}
}
