// Package netpol reads NetworkPolicies' egress rules as a CNI plugin
// enforces them, for the tests that check what a desktop Pod may reach:
// the pool namespace kit's policies as written (internal/deploytest) and
// as the pod network stand-in routes them (internal/testcluster). A Pod
// selected by any Egress policy may send only what one of those policies'
// rules admits; a Pod selected by none may send anything.
package netpol

import (
	"net/netip"
	"slices"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Selecting returns the policies that select a Pod with the given labels
// for Egress.
func Selecting(policies []networkingv1.NetworkPolicy, pod labels.Set) []networkingv1.NetworkPolicy {
	var out []networkingv1.NetworkPolicy
	for _, np := range policies {
		if slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) && matches(&np.Spec.PodSelector, pod) {
			out = append(out, np)
		}
	}
	return out
}

// AdmitsAddr reports whether a Pod with the given labels may send to addr
// (outside the cluster's Pods) on some port.
func AdmitsAddr(policies []networkingv1.NetworkPolicy, pod labels.Set, addr netip.Addr) bool {
	sel := Selecting(policies, pod)
	if len(sel) == 0 {
		return true // not isolated for egress
	}
	for _, np := range sel {
		for _, rule := range np.Spec.Egress {
			if len(rule.To) == 0 {
				return true
			}
			for _, peer := range rule.To {
				if peer.IPBlock != nil && InBlock(peer.IPBlock, addr) {
					return true
				}
			}
		}
	}
	return false
}

// AdmitsPod reports whether a Pod with the given labels may send to a Pod
// with labels peer in namespace ns, on some port.
func AdmitsPod(policies []networkingv1.NetworkPolicy, pod labels.Set, ns string, peer labels.Set) bool {
	sel := Selecting(policies, pod)
	if len(sel) == 0 {
		return true
	}
	nsLabels := labels.Set{"kubernetes.io/metadata.name": ns}
	for _, np := range sel {
		for _, rule := range np.Spec.Egress {
			if len(rule.To) == 0 {
				return true
			}
			for _, to := range rule.To {
				if to.IPBlock != nil || to.NamespaceSelector == nil && ns != np.Namespace {
					continue
				}
				if to.NamespaceSelector != nil && !matches(to.NamespaceSelector, nsLabels) {
					continue
				}
				if to.PodSelector != nil && !matches(to.PodSelector, peer) {
					continue
				}
				return true
			}
		}
	}
	return false
}

// InBlock reports whether addr is in b's CIDR and none of its exceptions.
func InBlock(b *networkingv1.IPBlock, addr netip.Addr) bool {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil || !cidr.Contains(addr) {
		return false
	}
	return !slices.ContainsFunc(b.Except, func(e string) bool {
		pre, err := netip.ParsePrefix(e)
		return err == nil && pre.Contains(addr)
	})
}

// matches reports whether s selects l; a selector the API server would
// not have taken selects nothing.
func matches(s *metav1.LabelSelector, l labels.Set) bool {
	sel, err := metav1.LabelSelectorAsSelector(s)
	return err == nil && sel.Matches(l)
}
