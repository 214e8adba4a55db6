package deploytest_test

import (
	"net/netip"
	"path/filepath"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/corral-dev/corral-vdi-portal/internal/deploytest"
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
		if got := egressAllowed(t, policies, tc.pod, netip.MustParseAddr(tc.to)); got != tc.want {
			t.Errorf("%s desktop to %s: allowed %v; want %v", tc.who, tc.to, got, tc.want)
		}
	}
	dns := labels.Set{"k8s-app": "kube-dns"}
	if egressToPodAllowed(t, policies, ct, "kube-system", dns) {
		t.Errorf("a desktop without egress reaches the cluster's DNS; want nothing")
	}
	if !egressToPodAllowed(t, policies, ctOut, "kube-system", dns) {
		t.Errorf("an outbound desktop cannot reach the cluster's DNS; want it to resolve names")
	}
	if egressToPodAllowed(t, policies, ctOut, "corral-vdi", labels.Set{"app.kubernetes.io/name": "corral-vdi-portal"}) {
		t.Errorf("an outbound desktop reaches the portal's Pods; want only DNS in the cluster")
	}
}

// selecting returns the Egress policies that select a Pod with podLabels.
func selecting(t *testing.T, policies []networkingv1.NetworkPolicy, podLabels labels.Set) []networkingv1.NetworkPolicy {
	t.Helper()
	var out []networkingv1.NetworkPolicy
	for _, np := range policies {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil {
			t.Fatalf("policy %s: %v", np.Name, err)
		}
		egress := false
		for _, pt := range np.Spec.PolicyTypes {
			egress = egress || pt == networkingv1.PolicyTypeEgress
		}
		if egress && sel.Matches(podLabels) {
			out = append(out, np)
		}
	}
	return out
}

// egressAllowed reports whether a Pod with podLabels may send to addr
// (outside the cluster's Pods) under policies.
func egressAllowed(t *testing.T, policies []networkingv1.NetworkPolicy, podLabels labels.Set, addr netip.Addr) bool {
	t.Helper()
	sel := selecting(t, policies, podLabels)
	if len(sel) == 0 {
		return true // not isolated for egress
	}
	for _, np := range sel {
		for _, rule := range np.Spec.Egress {
			if len(rule.To) == 0 {
				return true
			}
			for _, peer := range rule.To {
				if peer.IPBlock != nil && inBlock(t, peer.IPBlock, addr) {
					return true
				}
			}
		}
	}
	return false
}

// egressToPodAllowed reports whether a Pod with podLabels may send to a
// Pod with peerLabels in namespace ns under policies.
func egressToPodAllowed(t *testing.T, policies []networkingv1.NetworkPolicy, podLabels labels.Set, ns string, peerLabels labels.Set) bool {
	t.Helper()
	sel := selecting(t, policies, podLabels)
	if len(sel) == 0 {
		return true
	}
	nsLabels := labels.Set{"kubernetes.io/metadata.name": ns}
	for _, np := range sel {
		for _, rule := range np.Spec.Egress {
			if len(rule.To) == 0 {
				return true
			}
			for _, peer := range rule.To {
				if peer.IPBlock != nil || peer.NamespaceSelector == nil && ns != np.Namespace {
					continue
				}
				if peer.NamespaceSelector != nil && !matches(t, peer.NamespaceSelector, nsLabels) {
					continue
				}
				if peer.PodSelector != nil && !matches(t, peer.PodSelector, peerLabels) {
					continue
				}
				return true
			}
		}
	}
	return false
}

func matches(t *testing.T, s *metav1.LabelSelector, l labels.Set) bool {
	t.Helper()
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		t.Fatal(err)
	}
	return sel.Matches(l)
}

// inBlock reports whether addr is in b's CIDR and none of its exceptions.
func inBlock(t *testing.T, b *networkingv1.IPBlock, addr netip.Addr) bool {
	t.Helper()
	if !netip.MustParsePrefix(b.CIDR).Contains(addr) {
		return false
	}
	for _, e := range b.Except {
		if netip.MustParsePrefix(e).Contains(addr) {
			return false
		}
	}
	return true
}
