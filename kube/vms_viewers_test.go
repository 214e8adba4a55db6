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
// apiserver, where KubeVirt keeps one client per VMI (the stand-in too): the
// portal's second viewer is refused (it asks to preserve the session) and
// the holder's session goes on; a client that does not ask (virtctl vnc)
// kicks the holder, whose stream then ends cleanly (io.EOF), not as an error.
func TestVMConsoleOneViewer(t *testing.T) {
	s := newVMSetup(t)
	s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	ref := vdi.Ref{Namespace: ns, Name: "one-1"}
	testcluster.StoppedVM(t, admin, ns, ref.Name, map[string]string{vdi.LabelPool: "one"})
	if err := vms.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	apiserver, err := kube.NewSubresourcePath(s.sa)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	mustRFB(t, holder)

	begin := time.Now()
	if second, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC); err == nil {
		second.Close()
		t.Fatal("a second VNC viewer through the apiserver was let in; want 503 while the holder is connected")
	} else if !strings.Contains(err.Error(), "503") {
		t.Errorf("second viewer: %v; want 503 Service Unavailable", err)
	}
	t.Logf("second viewer refused after %s", time.Since(begin).Round(time.Millisecond))
	// The holder's session is whole: the server answers its version.
	holder.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := holder.Write([]byte("RFB 003.008\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(holder, make([]byte, 2)); err != nil {
		t.Fatalf("the holder's session after a second viewer: %v; want it going on", err)
	}

	// virtctl vnc asks nothing: it takes the display over.
	kicker := rawConsole(t, s.sa, ns, ref.Name, "vnc")
	defer kicker.Close()
	holder.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err = io.Copy(io.Discard, holder); err != nil {
		t.Errorf("the holder's stream after another client took the display: %v; want a clean end (io.EOF)", err)
	}
}

// rawConsole opens console of VMI ns/name through the apiserver as cfg,
// as virtctl does: no preserveSession.
func rawConsole(t *testing.T, cfg *rest.Config, ns, name, console string) *websocket.Conn {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := "wss" + strings.TrimPrefix(strings.TrimSuffix(cfg.Host, "/"), "https") +
		"/apis/subresources.kubevirt.io/v1/namespaces/" + ns + "/virtualmachineinstances/" + name + "/" + console
	h := http.Header{"Authorization": {"Bearer " + cfg.BearerToken}}
	d := websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{kube.SubprotocolKubeVirt}}
	ws, res, err := d.Dial(u, h)
	if err != nil {
		t.Fatalf("open %s of %s/%s: %v (%v)", console, ns, name, err, res)
	}
	return ws
}
