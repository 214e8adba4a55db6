package testcluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Node is a TEST-ONLY stand-in for what KubeVirt runs on a node, for
// KubeVirt's real control plane (StartKubeVirt): the kubelet (a Kubelet:
// it binds virt-controller's virt-launcher Pods to its Node and reports
// them Running with a loopback Pod IP) and virt-handler, which it plays
// here after pkg/virt-handler (v1.7.0):
//
//   - a VMI virt-controller has handed to the node (phase Scheduled,
//     status.nodeName this Node, its launcher Pod ready) becomes a guest:
//     a real local desktop (Xvnc, openbox, xterm, freerdp-shadow) served
//     at the launcher Pod's IP on 5900 and 3389, as a guest's own servers
//     are at the pod network address; then phase Running with that IP in
//     status.interfaces[0] (masquerade binding reports the Pod's IP);
//
//   - a VMI marked for deletion, or one whose guest has gone, is shut
//     down and goes Succeeded; virt-controller then deletes the launcher
//     Pod, drops its finalizers and the VM shows Stopped.
//
//   - virt-handler's console server (vnc, vnc/screenshot, console) over
//     mTLS with the KubeVirt CA's certificates, at a virt-handler Pod's IP
//     (node_console.go), which virt-api's subresources reach.
//
// The Node is labelled kubevirt.io/schedulable=true and carries no
// heartbeat annotation (virt-controller's node controller then counts it
// responsive). Two Nodes of one KubeVirt play a live migration
// (node_migration.go), and RestartHandler a virt-handler restart. Not
// played: usbredir, hotplug, the guest
// agent, readiness probes, boot delays and crashes; the KubeVirtStandIn
// still plays those for the older tests.
type Node struct {
	kubelet *Kubelet
	kv      *KubeVirt
	cl      client.Client
	dir     string // the guests' desktops, one folder each

	handler    *http.Server // virt-handler's console server (node_console.go)
	handlerLn  net.Listener
	handlerIP  string
	handlerTLS *tls.Config
	restart    chan struct{} // closed when virt-handler restarts: its console streams end

	mu       sync.Mutex
	guests   map[types.UID]*standInVMI    // VMI UID -> its running guest
	names    map[string]types.UID         // ns/name -> the UID of its running guest's VMI
	shots    int                          // screenshots served (node_console.go)
	busy     map[types.UID]bool           // VMI UID -> a boot or shutdown under way
	incoming map[types.UID][]net.Listener // migration UID -> the target's VNC and RDP listeners (node_migration.go)
	noIPs    map[string]bool              // ns/name -> report no IP (WithoutIPs)
	seq      int

	stop context.CancelFunc
	wg   sync.WaitGroup
}

// StartNode starts a stand-in node (kubelet and virt-handler) for this
// real KubeVirt control plane; it stops when tb ends, with every guest it
// runs. Guests need the local desktop's programs.
func (kv *KubeVirt) StartNode(tb testing.TB) *Node {
	tb.Helper()
	c := kv.c
	k := c.StartKubelet(tb)
	// As virt-handler's ServiceAccount: virt-api keeps anyone else's VMI
	// status changes out (StartKubeVirt binds it).
	cl, err := newClient(c.Impersonate(KubeVirtServiceAccount("kubevirt-handler")))
	if err != nil {
		tb.Fatal(err)
	}
	ctx := context.Background()
	schedulable := func(node *corev1.Node) {
		if node.Labels == nil {
			node.Labels = map[string]string{}
		}
		node.Labels[kubevirtv1.NodeSchedulable] = "true"
	}
	if err := Update(ctx, c.AdminClient(tb), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: k.Node}}, schedulable); err != nil {
		tb.Fatalf("testcluster: label the stand-in Node schedulable: %v", err)
	}
	dir, err := os.MkdirTemp("", "kvnode") // short: the desktops put Unix sockets here
	if err != nil {
		tb.Fatal(err)
	}
	lctx, cancel := context.WithCancel(ctx)
	n := &Node{kubelet: k, kv: kv, cl: cl, dir: dir, guests: map[types.UID]*standInVMI{}, names: map[string]types.UID{}, busy: map[types.UID]bool{},
		incoming: map[types.UID][]net.Listener{}, noIPs: map[string]bool{}, restart: make(chan struct{}), stop: cancel}
	tb.Cleanup(n.close)
	if err := n.serveConsoles(lctx, kv.ca); err != nil {
		tb.Fatal(err)
	}
	n.wg.Go(func() { n.loop(lctx) })
	return n
}

// Name returns the name of the Node the VMIs run on.
func (n *Node) Name() string { return n.kubelet.Node }

func (n *Node) close() {
	n.stop()
	n.wg.Wait()
	n.mu.Lock()
	guests := n.guests
	n.guests = map[types.UID]*standInVMI{}
	for _, lns := range n.incoming {
		for _, ln := range lns {
			ln.Close()
		}
	}
	n.mu.Unlock()
	for _, g := range guests {
		g.stop()
	}
	os.RemoveAll(n.dir)
}

// loop looks at the VMIs every 100 ms, as virt-handler's informer would
// be told of them, until ctx ends.
func (n *Node) loop(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var list kubevirtv1.VirtualMachineInstanceList
		if err := n.cl.List(ctx, &list); err != nil {
			continue
		}
		seen := map[types.UID]bool{}
		for i := range list.Items {
			vmi := &list.Items[i]
			if vmi.Status.NodeName != n.kubelet.Node && vmi.Labels[kubevirtv1.MigrationTargetNodeNameLabel] != n.kubelet.Node {
				continue
			}
			seen[vmi.UID] = true
			n.sync(ctx, vmi)
		}
		n.reap(seen)
	}
}

// sync does the next step for one VMI of this node, in the background.
func (n *Node) sync(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.busy[vmi.UID] {
		return
	}
	_, running := n.guests[vmi.UID]
	op := n.migrationStep(vmi, running)
	switch {
	case op != nil:
	case vmi.Status.NodeName != n.kubelet.Node: // a migration's target, waiting
	case vmi.IsFinal():
		if running {
			op = n.shutdown
		}
	case vmi.DeletionTimestamp != nil:
		op = n.shutdown
	case vmi.Status.Phase == kubevirtv1.Scheduled && !running:
		op = n.boot
	}
	if op == nil {
		return
	}
	n.busy[vmi.UID] = true
	n.wg.Go(func() {
		if err := op(ctx, vmi); err != nil && ctx.Err() == nil {
			fmt.Fprintf(os.Stderr, "testcluster: node %s: VMI %s/%s: %v\n", n.kubelet.Node, vmi.Namespace, vmi.Name, err)
		}
		n.mu.Lock()
		delete(n.busy, vmi.UID)
		n.mu.Unlock()
	})
}

// boot starts the guest of vmi at its launcher Pod's IP and reports the
// VMI Running there.
func (n *Node) boot(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	ip, err := n.launcherIP(ctx, vmi)
	if err != nil {
		return err
	}
	vnc, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(standInPortVNC)))
	if err != nil {
		return fmt.Errorf("the guest's VNC at its Pod's IP: %w", err)
	}
	rdp, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(standInPortRDP)))
	if err != nil {
		vnc.Close()
		return fmt.Errorf("the guest's RDP at its Pod's IP: %w", err)
	}
	n.mu.Lock()
	n.seq++
	dir := filepath.Join(n.dir, strconv.Itoa(n.seq))
	n.mu.Unlock()
	g, err := startGuest(ctx, dir, vmi.Name, vmi.UID, vnc, rdp, time.Now())
	if err != nil {
		return err
	}
	n.mu.Lock()
	n.guests[vmi.UID] = g
	n.names[vmi.Namespace+"/"+vmi.Name] = vmi.UID
	n.mu.Unlock()
	return n.setStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) {
		st.Phase = kubevirtv1.Running
		st.SelinuxContext = "none" // virt-handler's word for a node without SELinux, which a migration needs
		st.Interfaces = n.interfaces(vmi, ip)
	})
}

// WithoutIPs makes the VMI of namespace/name report no IP in
// status.interfaces from now on (an interface without ipAddress, as a
// bridge binding without a guest agent reports): at once if it runs on
// this node, and when it boots or migrates in. The guest still listens on
// its Pod's IP and virt-handler's consoles reach it, but a portal reading
// the VMI has no address to dial: it goes through virt-api's vnc
// subresource, where the one-client rule applies.
func (n *Node) WithoutIPs(ctx context.Context, namespace, name string) error {
	n.mu.Lock()
	n.noIPs[namespace+"/"+name] = true
	n.mu.Unlock()
	var vmi kubevirtv1.VirtualMachineInstance
	if err := n.cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &vmi); err != nil || vmi.Status.NodeName != n.Name() {
		return client.IgnoreNotFound(err)
	}
	return n.setStatus(ctx, &vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) { st.Interfaces = n.interfaces(&vmi, "") })
}

// interfaces is vmi's status.interfaces with its guest at ip: none of it
// reported for a VMI WithoutIPs.
func (n *Node) interfaces(vmi *kubevirtv1.VirtualMachineInstance, ip string) []kubevirtv1.VirtualMachineInstanceNetworkInterface {
	iface := kubevirtv1.VirtualMachineInstanceNetworkInterface{Name: "default", InterfaceName: "eth0", InfoSource: "domain, guest-agent"}
	n.mu.Lock()
	without := n.noIPs[vmi.Namespace+"/"+vmi.Name]
	n.mu.Unlock()
	if !without {
		iface.IP, iface.IPs = ip, []string{ip}
	}
	return []kubevirtv1.VirtualMachineInstanceNetworkInterface{iface}
}

// takeGuest removes vmi's guest from the node's and returns it, or nil.
func (n *Node) takeGuest(vmi *kubevirtv1.VirtualMachineInstance) *standInVMI {
	n.mu.Lock()
	defer n.mu.Unlock()
	g := n.guests[vmi.UID]
	delete(n.guests, vmi.UID)
	if n.names[vmi.Namespace+"/"+vmi.Name] == vmi.UID {
		delete(n.names, vmi.Namespace+"/"+vmi.Name)
	}
	return g
}

// shutdown stops vmi's guest and reports the VMI Succeeded, as
// virt-handler does once the domain is gone.
func (n *Node) shutdown(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) error {
	g := n.takeGuest(vmi)
	if g != nil {
		g.stop()
	}
	if vmi.IsFinal() {
		return nil
	}
	return n.setStatus(ctx, vmi, func(st *kubevirtv1.VirtualMachineInstanceStatus) { st.Phase = kubevirtv1.Succeeded })
}

// reap stops the guests of VMIs that are gone.
func (n *Node) reap(seen map[types.UID]bool) {
	n.mu.Lock()
	var gone []*standInVMI
	for uid, g := range n.guests {
		if !seen[uid] && !n.busy[uid] {
			gone = append(gone, g)
			delete(n.guests, uid)
			for key, u := range n.names {
				if u == uid {
					delete(n.names, key)
				}
			}
		}
	}
	n.mu.Unlock()
	for _, g := range gone {
		g.stop()
	}
}

// launcherIP returns the Pod IP of vmi's virt-launcher Pod on this node.
func (n *Node) launcherIP(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance) (string, error) {
	var pods corev1.PodList
	if err := n.cl.List(ctx, &pods, client.InNamespace(vmi.Namespace), client.MatchingLabels{kubevirtv1.CreatedByLabel: string(vmi.UID)}); err != nil {
		return "", err
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == n.kubelet.Node && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			return p.Status.PodIP, nil
		}
	}
	return "", errors.New("no running virt-launcher Pod with an IP on this node")
}

// setStatus changes vmi's status with the latest object (see update).
func (n *Node) setStatus(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstanceStatus)) error {
	return n.update(ctx, vmi, func(v *kubevirtv1.VirtualMachineInstance) { change(&v.Status) })
}

// update changes vmi with the latest object, retrying on conflicts
// (virt-controller writes the VMI too); a VMI gone or made anew is left.
func (n *Node) update(ctx context.Context, vmi *kubevirtv1.VirtualMachineInstance, change func(*kubevirtv1.VirtualMachineInstance)) error {
	for range 20 {
		var cur kubevirtv1.VirtualMachineInstance
		if err := n.cl.Get(ctx, client.ObjectKeyFromObject(vmi), &cur); err != nil {
			return client.IgnoreNotFound(err)
		}
		if cur.UID != vmi.UID {
			return nil
		}
		change(&cur)
		err := n.cl.Update(ctx, &cur) // KubeVirt's VMI has no status subresource

		if !apierrors.IsConflict(err) {
			return client.IgnoreNotFound(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("VMI %s/%s: still conflicting", vmi.Namespace, vmi.Name)
}
