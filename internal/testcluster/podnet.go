package testcluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os/exec"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/corral-dev/corral-vdi-portal/internal/netpol"
	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// Addresses on the stand-in pod network's node, each answering on TCP:
// what a desktop Pod must not reach (the cloud metadata address, the API
// server behind the kubernetes Service's ClusterIP) and what one allowed
// outbound may (an address on the internet).
const (
	PodNetMetadata  = "169.254.169.254:80"
	PodNetAPIServer = "10.96.0.1:443"
	PodNetInternet  = "198.51.100.7:80"
)

// PodNetwork is a TEST-ONLY stand-in for the pod network a CNI plugin
// gives a node's Pods, with NetworkPolicy egress enforced, as Calico or
// Cilium do: the stand-in kubelet's Pods otherwise run their exec'd
// commands in the host's network, where no policy applies. The node is a
// network namespace of its own holding PodNetMetadata, PodNetInternet and
// PodNetAPIServer (which forwards to the test's API server, as kube-proxy
// does); each Pod attached gets a network namespace of its own on a veth
// to the node, where the kubelet then runs its exec'd commands.
//
// Egress is enforced by the Pod's routes: with no Egress policy selecting
// the Pod, a default route; else a route for each ipBlock of the
// policies' rules and a "prohibit" route for each of its exceptions (a
// connection there fails at once; a real CNI drops it or rejects it).
// A rule with ports, or a peer chosen by Pod or namespace selector, is not
// played: it admits nothing here, which is stricter than a CNI, never
// kinder. The stand-in checks that its routes decide each prefix the
// policies name as the policies do, and fails the test where they would
// not. IPv6 is not routed.
type PodNetwork struct {
	k    *Kubelet
	node string               // the node's network namespace
	via  map[types.UID]string // an attached Pod -> the node's end of its veth (under k.mu)
}

// StartPodNetwork makes the node's network for the kubelet's Pods; it
// skips the test where the machine cannot (not root). apiServer is the
// API server's URL (rest.Config.Host).
func (k *Kubelet) StartPodNetwork(tb testing.TB, apiServer string) *PodNetwork {
	tb.Helper()
	node, _ := testnet.Reserve(tb, "cvnode")
	mustIP(tb, "-n", node, "link", "set", "lo", "up")
	for _, a := range []string{PodNetMetadata, PodNetAPIServer, PodNetInternet} {
		host, _, _ := net.SplitHostPort(a)
		mustIP(tb, "-n", node, "addr", "add", host+"/32", "dev", "lo")
	}
	u, err := url.Parse(apiServer)
	if err != nil {
		tb.Fatal(err)
	}
	n := &testnet.Net{NS: node}
	n.InOutside(tb, func() {
		for _, a := range []string{PodNetMetadata, PodNetInternet} {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { ln.Close() })
			go serveReached(ln)
		}
		ln, err := net.Listen("tcp", PodNetAPIServer)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { ln.Close() })
		go forwardTo(ln, u.Host)
	})
	return &PodNetwork{k: k, node: node, via: map[types.UID]string{}}
}

// Attach gives pod a network namespace of its own on the node's network
// and enforces the NetworkPolicies of its namespace on it (Enforce); the
// kubelet runs pod's exec'd commands there from now on.
func (p *PodNetwork) Attach(tb testing.TB, pod *corev1.Pod) {
	tb.Helper()
	ns, n := testnet.Reserve(tb, "cvpod")
	node, self := fmt.Sprintf("10.232.%d.1", n), fmt.Sprintf("10.232.%d.2", n)
	dev := fmt.Sprintf("cvpn%d", n)
	mustIP(tb, "-n", p.node, "link", "add", dev, "type", "veth", "peer", "name", "eth0", "netns", ns)
	mustIP(tb, "-n", p.node, "addr", "add", node+"/30", "dev", dev)
	mustIP(tb, "-n", p.node, "link", "set", dev, "up")
	mustIP(tb, "-n", ns, "addr", "add", self+"/30", "dev", "eth0")
	mustIP(tb, "-n", ns, "link", "set", "eth0", "up")
	mustIP(tb, "-n", ns, "link", "set", "lo", "up")
	p.k.mu.Lock()
	p.k.netns[pod.UID] = ns
	p.via[pod.UID] = node
	p.k.mu.Unlock()
	tb.Cleanup(func() {
		p.k.mu.Lock()
		delete(p.k.netns, pod.UID)
		delete(p.via, pod.UID)
		p.k.mu.Unlock()
	})
	p.Enforce(tb, pod)
}

// Enforce sets the routes of attached pod from the NetworkPolicies that
// select it now, as a CNI's policy agent does when they change.
func (p *PodNetwork) Enforce(tb testing.TB, pod *corev1.Pod) {
	tb.Helper()
	p.k.mu.Lock()
	ns, via := p.k.netns[pod.UID], p.via[pod.UID]
	p.k.mu.Unlock()
	if ns == "" {
		tb.Fatalf("pod network: %s/%s is not attached", pod.Namespace, pod.Name)
	}
	list, err := p.k.cs.NetworkingV1().NetworkPolicies(pod.Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		tb.Fatal(err)
	}
	allow, deny, isolated := egressRoutes(tb, list.Items, pod)
	// The routes set before go; the veth's own (proto kernel) stays.
	mustIP(tb, "-n", ns, "route", "flush", "table", "main", "proto", "boot")
	if !isolated {
		mustIP(tb, "-n", ns, "route", "add", "default", "via", via)
		return
	}
	for _, a := range allow {
		mustIP(tb, "-n", ns, "route", "add", a.String(), "via", via)
	}
	for _, d := range deny {
		mustIP(tb, "-n", ns, "route", "add", "prohibit", d.String())
	}
	// The routes decide each named prefix as the policies do.
	for _, pre := range slices.Concat(allow, deny) {
		addr := pre.Addr()
		want := netpol.AdmitsAddr(list.Items, pod.Labels, addr)
		got := routedTo(allow, deny, addr)
		if got != want {
			tb.Fatalf("pod network: the routes for %s/%s send to %s: %v, but its NetworkPolicies say %v; the stand-in cannot play these policies", pod.Namespace, pod.Name, addr, got, want)
		}
	}
}

// execPrefix returns the command that runs the rest in pod's network, or
// nil for a Pod not attached (the host's network).
func (k *Kubelet) execPrefix(uid types.UID) []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if ns := k.netns[uid]; ns != "" {
		return []string{"nsenter", "--net=/run/netns/" + ns, "--"}
	}
	return nil
}

// egressRoutes returns the IPv4 prefixes the policies selecting pod admit
// and those they except, and whether any selects it for Egress.
func egressRoutes(tb testing.TB, policies []networkingv1.NetworkPolicy, pod *corev1.Pod) (allow, deny []netip.Prefix, isolated bool) {
	tb.Helper()
	for _, np := range netpol.Selecting(policies, pod.Labels) {
		isolated = true
		for _, rule := range np.Spec.Egress {
			if len(rule.Ports) > 0 {
				continue // not played: admits nothing here
			}
			if len(rule.To) == 0 {
				allow = append(allow, netip.MustParsePrefix("0.0.0.0/0"))
			}
			for _, peer := range rule.To {
				if peer.IPBlock == nil {
					continue // selectors: not played
				}
				cidr := netip.MustParsePrefix(peer.IPBlock.CIDR)
				if !cidr.Addr().Is4() {
					continue
				}
				allow = append(allow, cidr)
				for _, e := range peer.IPBlock.Except {
					deny = append(deny, netip.MustParsePrefix(e))
				}
			}
		}
	}
	return allow, deny, isolated
}

// routedTo reports whether the longest prefix of allow and deny holding
// addr is an allowed one, as the kernel's route lookup decides.
func routedTo(allow, deny []netip.Prefix, addr netip.Addr) bool {
	best, ok := -1, false
	for _, a := range allow {
		if a.Contains(addr) && a.Bits() > best {
			best, ok = a.Bits(), true
		}
	}
	for _, d := range deny {
		if d.Contains(addr) && d.Bits() >= best {
			best, ok = d.Bits(), false
		}
	}
	return ok
}

// mustIP runs ip with args.
func mustIP(tb testing.TB, args ...string) {
	tb.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		tb.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// serveReached answers each connection on ln with "reached\n".
func serveReached(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.WriteString(c, "reached\n")
		c.Close()
	}
}

// forwardTo pipes each connection on ln to addr, as kube-proxy does for a
// Service's ClusterIP.
func forwardTo(ln net.Listener, addr string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			u, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer u.Close()
			go io.Copy(u, c)
			io.Copy(c, u)
		}()
	}
}
