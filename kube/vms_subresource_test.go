package kube_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMConsoles opens the consoles of VMs running real desktops (the
// KubeVirt stand-in), as the portal's ServiceAccount: directly at the VMI's
// IP (VMs.Dial) and through the apiserver's subresources
// (SubresourcePath), including a VMI that reports no IP and a VM stopped.
func TestVMConsoles(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ctx, ns, admin, vms := s.ctx, s.ns, s.admin, s.vms
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: s.sa})
	if err != nil {
		t.Fatal(err)
	}
	if apiserver.Name() != "apiserver" {
		t.Errorf("Name() = %q; want apiserver, the path sessions record", apiserver.Name())
	}
	withIP, withoutIP := vdi.Ref{Namespace: ns, Name: "con-1"}, vdi.Ref{Namespace: ns, Name: "noip-1"}
	standIn.WithoutIPs(ns, withoutIP.Name)
	for _, ref := range []vdi.Ref{withIP, withoutIP} {
		testcluster.StoppedVM(t, admin, ns, ref.Name, map[string]string{vdi.LabelPool: "con"})
		if m, _ := vms.Member(ctx, ref); len(m.Protocols) != 0 {
			t.Errorf("stopped %s offers %v; want nothing until it runs", ref, m.Protocols)
		}
		begin := time.Now()
		if err := vms.Start(ctx, ref); err != nil {
			t.Fatalf("Start %s: %v", ref, err)
		}
		t.Logf("%s started (desktop answering) in %s", ref, time.Since(begin).Round(time.Millisecond))
		m, err := vms.Member(ctx, ref)
		if want := []vdi.Protocol{vdi.ProtocolRDP, vdi.ProtocolVNC, vdi.ProtocolSerial}; err != nil || !slices.Equal(m.Protocols, want) {
			t.Errorf("running %s offers %v, %v; want %v", ref, m.Protocols, err, want)
		}
	}

	t.Run("DirectVNC", func(t *testing.T) {
		conn, err := vms.Dial(ctx, withIP, vdi.ProtocolVNC)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if a, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() || a.IP.To4()[1] != 77 || a.Port != 5900 {
			t.Errorf("direct VNC reached %v; want the VMI's IP 127.77.x.y port 5900", conn.RemoteAddr())
		}
		mustRFB(t, conn)
	})
	t.Run("DirectRDP", func(t *testing.T) {
		mustProbeRDP(t, func(ctx context.Context) (net.Conn, error) { return vms.Dial(ctx, withIP, vdi.ProtocolRDP) })
	})
	t.Run("DirectSerial", func(t *testing.T) {
		_, err := vms.Dial(ctx, withIP, vdi.ProtocolSerial)
		if err == nil || isFinal(err) || !strings.Contains(err.Error(), "no direct path") {
			t.Errorf("direct serial: %v; want a plain error saying there is no direct path", err)
		}
	})
	t.Run("APIServerVNC", func(t *testing.T) {
		conn, err := apiserver.Dial(ctx, withIP, vdi.ProtocolVNC)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustRFB(t, conn)
	})
	t.Run("APIServerSerial", func(t *testing.T) {
		conn, err := apiserver.Dial(ctx, withIP, vdi.ProtocolSerial)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(15 * time.Second))
		// The shell computes the answer, so an echo of the input alone
		// does not pass.
		if _, err := conn.Write([]byte("echo corral-$((6*7))\r")); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		buf := make([]byte, 4096)
		for !strings.Contains(got.String(), "corral-42") {
			n, err := conn.Read(buf)
			got.Write(buf[:n])
			if err != nil {
				t.Fatalf("serial console said %q, then %v; want corral-42", got.String(), err)
			}
		}
	})
	t.Run("APIServerRDP", func(t *testing.T) {
		mustProbeRDP(t, func(ctx context.Context) (net.Conn, error) { return apiserver.Dial(ctx, withIP, vdi.ProtocolRDP) })
	})

	t.Run("WithoutIPs", func(t *testing.T) {
		for _, p := range []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolRDP} {
			_, err := vms.Dial(ctx, withoutIP, p)
			if err == nil || isFinal(err) || !strings.Contains(err.Error(), "reports no IP address") {
				t.Errorf("direct %s to a VMI without IPs: %v; want a plain error saying it reports no IP", p, err)
			}
		}
		conn, err := apiserver.Dial(ctx, withoutIP, vdi.ProtocolVNC)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		mustRFB(t, conn)
		// virt-api's portforward dials the VMI's first IP: without one there
		// is no RDP through the apiserver either, and the portal does not try.
		if _, err := apiserver.Dial(ctx, withoutIP, vdi.ProtocolRDP); err == nil || isFinal(err) || !strings.Contains(err.Error(), "no IP") {
			t.Errorf("apiserver RDP to a VMI without IPs: %v; want a plain error saying it reports no IP", err)
		}
	})

	t.Run("GuestAgentReportsAnotherVMsIP", func(t *testing.T) {
		// Root in a guest makes its agent report the IP of another user's
		// VM: neither path may dial it.
		var victim kubevirtv1.VirtualMachineInstance
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: withIP.Name}, &victim); err != nil || victim.Status.Interfaces[0].IP == "" {
			t.Fatalf("victim VMI: %v, %+v", err, victim.Status.Interfaces)
		}
		victimIP := victim.Status.Interfaces[0].IP
		for _, infoSource := range []string{"guest-agent", "domain, guest-agent"} {
			standIn.GuestAgentReports(t, ns, withoutIP.Name, victimIP, infoSource)
			for _, p := range []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolRDP} {
				if conn, err := vms.Dial(ctx, withoutIP, p); err == nil {
					conn.Close()
					t.Errorf("direct %s to a VMI whose guest agent reports %s (%s): dialled %v; want refused", p, victimIP, infoSource, conn.RemoteAddr())
				} else if isFinal(err) || !strings.Contains(err.Error(), "does not dial addresses only the guest reports") {
					t.Errorf("direct %s with a spoofed IP (%s): %v; want a plain error naming the rule", p, infoSource, err)
				}
			}
			if conn, err := apiserver.Dial(ctx, withoutIP, vdi.ProtocolRDP); err == nil {
				conn.Close()
				t.Errorf("apiserver RDP to a VMI whose guest agent reports %s (%s): opened; want refused before virt-api dials it", victimIP, infoSource)
			} else if isFinal(err) || !strings.Contains(err.Error(), "virt-api's portforward would dial it") {
				t.Errorf("apiserver RDP with a spoofed IP (%s): %v; want a plain error naming the rule", infoSource, err)
			}
		}
	})

	t.Run("Forbidden", func(t *testing.T) {
		unbound, err := kube.NewSubresourcePath(kube.Config{REST: s.c.ServiceAccount(t, ns, "nobody")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := unbound.Dial(ctx, withIP, vdi.ProtocolVNC); err == nil || !strings.Contains(err.Error(), "403") {
			t.Errorf("Dial by an unbound ServiceAccount: %v; want 403 Forbidden", err)
		}
	})

	t.Run("Stopped", func(t *testing.T) {
		// A console open when the VM stops ends with it.
		open, err := apiserver.Dial(ctx, withIP, vdi.ProtocolVNC)
		if err != nil {
			t.Fatal(err)
		}
		defer open.Close()
		mustRFB(t, open)
		begin := time.Now()
		if err := vms.Stop(ctx, withIP); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		t.Logf("%s stopped in %s", withIP, time.Since(begin).Round(time.Millisecond))
		open.SetDeadline(time.Now().Add(10 * time.Second))
		var nerr net.Error
		if _, err := io.Copy(io.Discard, open); errors.As(err, &nerr) && nerr.Timeout() {
			t.Errorf("a console open across Stop: %v; want it ended by the stop", err)
		}
		var vmi kubevirtv1.VirtualMachineInstance
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: withIP.Name}, &vmi); !apierrors.IsNotFound(err) {
			t.Errorf("VMI after Stop: %v (phase %q); want NotFound", err, vmi.Status.Phase)
		}
		for _, p := range []vdi.Protocol{vdi.ProtocolVNC, vdi.ProtocolRDP} {
			_, err := vms.Dial(ctx, withIP, p)
			if !isFinal(err) || vdi.ErrorCode(err) != vdi.EUnavailable || !strings.Contains(err.Error(), "stopped") {
				t.Errorf("direct %s to a stopped VM: %v; want a final EUnavailable saying it is stopped", p, err)
			}
		}
		if _, err := apiserver.Dial(ctx, withIP, vdi.ProtocolVNC); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("apiserver VNC to a stopped VM: %v; want 404", err)
		}
		if _, err := vms.Dial(ctx, vdi.Ref{Namespace: ns, Name: "gone"}, vdi.ProtocolVNC); vdi.ErrorCode(err) != vdi.ENotFound {
			t.Errorf("direct VNC to a missing VM: %v; want ENotFound", err)
		}
	})
}

// isFinal reports whether err is one the handlers stop at rather than try
// the next path: a *vdi.Error not found, forbidden, invalid, or
// unavailable without a cause.
func isFinal(err error) bool {
	var e *vdi.Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Code {
	case vdi.ENotFound, vdi.EForbidden, vdi.EInvalid:
		return true
	case vdi.EUnavailable:
		return e.Err == nil
	}
	return false
}

// mustRFB reads a VNC server's greeting from conn.
func mustRFB(t *testing.T, conn net.Conn) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	defer conn.SetDeadline(time.Time{})
	greeting := make([]byte, 12)
	if _, err := io.ReadFull(conn, greeting); err != nil || string(greeting) != "RFB 003.008\n" {
		t.Fatalf("greeting %q, %v; want RFB 003.008", greeting, err)
	}
}

// mustProbeRDP dials and checks that an RDP server answers X.224.
func mustProbeRDP(t *testing.T, dial func(context.Context) (net.Conn, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := dial(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := relay.ProbeRDP(ctx, conn); err != nil {
		t.Errorf("RDP probe: %v; want an X.224 Connection Confirm", err)
	}
}
