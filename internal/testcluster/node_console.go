package testcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// handlerConsolePort is virt-handler's console server port, which virt-api
// dials at the handler Pod's IP (virt-api's --console-server-port default).
const handlerConsolePort = 8186

// TEST-ONLY: the node stand-in's virt-handler console server, as
// pkg/virt-handler/rest (v1.7.0) serves it to virt-api over mTLS with the
// KubeVirt CA's certificates (virt-api finds it by listing Pods labelled
// kubevirt.io=virt-handler on the VMI's node and dials their IP):
//
//   - /v1/namespaces/{ns}/virtualmachineinstances/{name}/vnc: a websocket
//     to the guest's display; one client per VMI, a new one closes the
//     old (console.go), ?preserveSession=true gets 503 while one is there;
//   - .../vnc/screenshot: a PNG of the display, kicking nobody;
//   - .../console: the serial console (a shell on a pty of the guest).
//
// usbredir is not played (the KubeVirtStandIn has it).

// serveConsoles publishes the node's virt-handler Pod, waits for the
// kubelet stand-in to give it an IP and serves the console server there
// until ctx ends.
func (n *Node) serveConsoles(ctx context.Context, ca *kubeVirtCA) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: KubeVirtNamespace, Name: "virt-handler-" + n.kubelet.Node,
		Labels: map[string]string{kubevirtv1.AppLabel: "virt-handler"}},
		Spec: corev1.PodSpec{NodeName: n.kubelet.Node, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "virt-handler", Image: "corral.test/virt-handler:" + KubeVirtVersion}}}}
	if err := n.cl.Create(ctx, pod); err != nil {
		return fmt.Errorf("testcluster: publish the virt-handler Pod: %w", err)
	}
	var ip string
	if err := poll(ctx, 30*time.Second, func() bool {
		if err := n.cl.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false
		}
		ip = pod.Status.PodIP
		return ip != ""
	}); err != nil {
		return fmt.Errorf("testcluster: the virt-handler Pod got no IP: %w", err)
	}
	cfg, err := ca.handlerServerTLS()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(handlerConsolePort)))
	if err != nil {
		return fmt.Errorf("testcluster: virt-handler's console server at its Pod's IP: %w", err)
	}
	const vmi = "GET /v1/namespaces/{ns}/virtualmachineinstances/{name}/"
	mux := http.NewServeMux()
	mux.HandleFunc(vmi+"vnc", n.handleConsole("vnc"))
	mux.HandleFunc(vmi+"console", n.handleConsole("console"))
	mux.HandleFunc(vmi+"vnc/screenshot", n.handleScreenshot)
	n.handler = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	n.handlerIP, n.handlerTLS, n.handlerLn = ip, cfg, ln
	n.wg.Go(func() { n.handler.Serve(tls.NewListener(ln, cfg)) })
	n.wg.Go(func() {
		<-ctx.Done()
		n.handler.Close()
	})
	return nil
}

// RestartHandler restarts the node's virt-handler, as a crash or a
// DaemonSet rollout does: the console streams it serves through virt-api
// end at once, nothing answers at its address for down (virt-api's dial is
// refused), then it serves again there. The guests go on: their own
// servers and the direct path are the launcher Pods', not virt-handler's.
func (n *Node) RestartHandler(down time.Duration) error {
	n.mu.Lock()
	close(n.restart)
	n.restart = make(chan struct{})
	ln := n.handlerLn
	n.mu.Unlock()
	ln.Close()
	time.Sleep(down)
	ln, err := net.Listen("tcp", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("testcluster: virt-handler back at its address: %w", err)
	}
	n.mu.Lock()
	n.handlerLn = ln
	n.mu.Unlock()
	n.wg.Go(func() { n.handler.Serve(tls.NewListener(ln, n.handlerTLS)) })
	return nil
}

// guest returns the running guest of VMI namespace/name, or nil.
func (n *Node) guest(namespace, name string) *standInVMI {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.guests[n.names[namespace+"/"+name]]
}

// handleConsole serves the vnc or console websocket of a VMI.
func (n *Node) handleConsole(console string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		g := n.guest(r.PathValue("ns"), r.PathValue("name"))
		if g == nil {
			http.Error(w, "VMI not running on this node", http.StatusNotFound)
			return
		}
		preserve, _ := strconv.ParseBool(r.URL.Query().Get("preserveSession"))
		kick, release, ok := g.takeConsole(console, preserve && console == "vnc")
		if !ok {
			http.Error(w, "the VNC session is in use and preserveSession keeps it", http.StatusServiceUnavailable)
			return
		}
		defer release()
		n.mu.Lock()
		restart := n.restart
		n.mu.Unlock()
		var conn net.Conn
		var err error
		if console == "vnc" {
			conn, err = net.Dial("unix", g.displaySocket())
		} else {
			conn, err = g.openSerial()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		serveStream(w, r, g, conn, either(kick, restart, r.Context().Done()))
	}
}

// either returns a channel closed when a or b closes, or left open once
// done closes.
func either(a, b, done <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		case <-done:
			return
		}
		close(out)
	}()
	return out
}

// handleScreenshot serves vnc/screenshot: a PNG of the display.
func (n *Node) handleScreenshot(w http.ResponseWriter, r *http.Request) {
	g := n.guest(r.PathValue("ns"), r.PathValue("name"))
	if g == nil {
		http.Error(w, "VMI not running on this node", http.StatusNotFound)
		return
	}
	png, err := displayPNG(g)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	n.mu.Lock()
	n.shots++
	n.mu.Unlock()
	w.Header().Set("Content-Type", "image/png")
	w.Write(png)
}

// Screenshots returns how many screenshots the node's virt-handler served.
func (n *Node) Screenshots() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.shots
}

// Consoles returns the counts of console ("vnc" or "console") of VMI
// namespace/name on this node's virt-handler since the guest started: the
// clients it let in, those a newer client kicked, and those refused
// (preserveSession) while another held it.
func (n *Node) Consoles(namespace, name, console string) ConsoleCounts {
	return n.guest(namespace, name).consoleCounts(console)
}

// Execs returns the counts of Pod namespace/name's exec sessions on this
// node's kubelet (a container desktop's terminal through pods/exec).
func (n *Node) Execs(namespace, name string) ExecCounts {
	return n.kubelet.Execs(namespace, name)
}

// Holding reports whether a client holds console of VMI namespace/name on
// this node now.
func (n *Node) Holding(namespace, name, console string) bool {
	return n.guest(namespace, name).holding(console)
}
