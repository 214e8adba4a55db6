package kube_test

import (
	"context"
	"io"
	"net"
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
// second portal connection (a replica racing the screen's owner) asks to
// preserve the session and is refused with 503, never kicking the first;
// a viewer that does not ask (virtctl vnc) takes the display over and the
// portal's stream ends cleanly (io.EOF, not an error); a viewer asking to
// preserve the session is refused while the portal's console holds it,
// which goes on.
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
	if c, err := apiserver.Dial(ctx, ref, vdi.ProtocolVNC); err == nil || !strings.Contains(err.Error(), "503") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a second portal connection: %v; want refused with 503 (preserveSession), the first kept", err)
	}
	second, _, err := dialConsole(t, s.sa, ns, ref.Name, "vnc")
	if err != nil {
		t.Fatalf("a viewer that does not preserve the session: %v; want it to take the display over", err)
	}
	first.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, first); err != nil {
		t.Errorf("the portal's stream after another viewer took over: %v; want a clean end (io.EOF)", err)
	}
	second.Close()

	// A viewer that asks to preserve the session (virtctl vnc
	// --preserve-session) is refused while the portal's console holds the
	// display, which goes on.
	third := dialVNCWhenFree(t, apiserver, ref)
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

// dialVNCWhenFree opens ref's VNC display through the apiserver as the
// portal does (preserving the session) once the stand-in has seen its
// last client go.
func dialVNCWhenFree(t *testing.T, apiserver *kube.SubresourcePath, ref vdi.Ref) net.Conn {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		c, err := apiserver.Dial(context.Background(), ref, vdi.ProtocolVNC)
		if err == nil {
			return c
		}
		if time.Now().After(end) {
			t.Fatalf("the VNC display after its last client went: %v", err)
		}
	}
}
