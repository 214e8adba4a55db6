package kube_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMConsoleOneViewer opens a VMI's VNC display twice through the
// apiserver, where KubeVirt keeps one client per VMI (the stand-in too): a
// second portal console takes the display over (the portal's own rule
// decides who has it) and the first one's stream ends cleanly (io.EOF, not
// an error); a viewer asking to preserve the session (KubeVirt 1.7 on) is
// refused with 503 while the portal's console holds it, which goes on.
func TestVMConsoleOneViewer(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	ref := vdi.Ref{Namespace: ns, Name: "one-1"}
	testcluster.StoppedVM(t, admin, ns, ref.Name, map[string]string{vdi.LabelPool: "one"})
	if err := vms.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: s.sa})
	if err != nil {
		t.Fatal(err)
	}
	first, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	mustRFB(t, first)
	second, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatalf("a second console: %v; want it to take the display over", err)
	}
	defer second.Close()
	mustRFB(t, second)
	first.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, first); err != nil {
		t.Errorf("the first console's stream after the second took over: %v; want a clean end (io.EOF)", err)
	}
	second.Close()

	// A viewer that asks to preserve the session (virtctl vnc
	// --preserve-session) is refused while the portal's console holds the
	// display, which goes on.
	third, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	mustRFB(t, third)
	if ws, res, err := dialConsole(t, s.sa, ns, ref.Name, "vnc?preserveSession=true"); err == nil {
		ws.Close()
		t.Fatal("a preserving viewer was let in next to the portal's console; want 503")
	} else if res == nil || res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a preserving viewer: %v (%v); want 503 Service Unavailable", err, res)
	}
	third.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := third.Write([]byte("RFB 003.008\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(third, make([]byte, 2)); err != nil {
		t.Errorf("the portal's console after a refused viewer: %v; want it going on", err)
	}
}

// dialConsole opens console (with a query after "?") of VMI ns/name
// through the apiserver as cfg, as virtctl does.
func dialConsole(t *testing.T, cfg *rest.Config, ns, name, console string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := "wss" + strings.TrimPrefix(strings.TrimSuffix(cfg.Host, "/"), "https") +
		"/apis/subresources.kubevirt.io/v1/namespaces/" + ns + "/virtualmachineinstances/" + name + "/" + console
	h := http.Header{"Authorization": {"Bearer " + cfg.BearerToken}}
	d := websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{kube.SubprotocolKubeVirt}}
	return d.Dial(u, h)
}
