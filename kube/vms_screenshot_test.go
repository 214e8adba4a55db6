package kube_test

import (
	"errors"
	"image"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestVMsScreenshot: on a KubeVirt with vnc/screenshot (1.7 on) the
// thumbnail comes from that subresource, and the holder's console through
// virt-api stays connected; a second VNC client through virt-api, as the
// old thumbnail over the vnc subresource would be, kicks it (the control
// that shows the check can fail).
func TestVMsScreenshot(t *testing.T) {
	s := newVMSetup(t)
	standIn := s.c.StartKubeVirtStandIn(t)
	ref := vdi.Ref{Namespace: s.ns, Name: "shot-1"}
	testcluster.StoppedVM(t, s.admin, s.ns, ref.Name, map[string]string{vdi.LabelPool: "shot"})
	svc, _ := s.service(t)
	if _, err := svc.Screenshot(s.ctx, ref); vdi.ErrorCode(err) != vdi.EUnavailable {
		t.Errorf("screenshot of a stopped VM: %v; want EUnavailable saying it is stopped", err)
	}
	if err := s.vms.Start(s.ctx, ref); err != nil {
		t.Fatal(err)
	}
	apiserver, err := kube.NewSubresourcePath(kube.Config{REST: s.sa})
	if err != nil {
		t.Fatal(err)
	}
	holder, err := apiserver.Dial(s.ctx, ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if _, err := snapshot.Take(holder, 0, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("the holder's console: %v", err)
	}

	png, err := svc.Screenshot(s.ctx, ref)
	if err != nil {
		t.Fatalf("Screenshot: %v", err)
	}
	img, err := snapshot.FromPNG(png, 320)
	if err != nil {
		t.Fatal(err)
	}
	if got := img.Bounds().Dx(); got != 320 {
		t.Errorf("thumbnail width %d; want 320", got)
	}
	if n := standIn.Screenshots(ref.Namespace, ref.Name); n != 1 {
		t.Errorf("the stand-in served %d screenshots; want 1 (the picture came another way)", n)
	}
	if err := stillOpen(holder); err != nil {
		t.Errorf("the holder's console after a screenshot: %v; want it connected", err)
	}

	// The control, on fresh connections (a websocket read that timed out
	// stays failed): a second VNC client that does not preserve the
	// session, as the old thumbnail over the vnc subresource did, kicks
	// the first. (The portal's own asks to preserve it: refused, 503.)
	holder.Close()
	first := dialVNCWhenFree(t, apiserver, ref)
	defer first.Close()
	mustRFB(t, first)
	if c, err := apiserver.Dial(s.ctx, ref, vdi.ProtocolVNC); err == nil || !strings.Contains(err.Error(), "503") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a second VNC connection of the portal's: %v; want refused with 503 (preserveSession)", err)
	}
	second, _, err := dialConsole(t, s.sa, ref.Namespace, ref.Name, "vnc")
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, first); errors.Is(err, os.ErrDeadlineExceeded) {
		t.Error("the first VNC client survived a second one; want it kicked (virt-handler's rule), or this test proves nothing")
	}
}

// TestVMsScreenshot_OlderKubeVirt: a virt-api that does not list
// vnc/screenshot (KubeVirt before 1.7) gets no screenshot request; the
// error says why and wraps vdi.ErrNoScreenshot, and the thumbnail is taken
// as before, over the guest's own VNC server at the VMI's IP.
func TestVMsScreenshot_OlderKubeVirt(t *testing.T) {
	c := testcluster.MustStart(t) // discovery is cluster-wide: a cluster of its own
	standIn := c.StartKubeVirtStandIn(t)
	standIn.WithoutScreenshots()
	c.Apply(t, "../deploy/rbac.yaml")
	vms, err := kube.NewVMs(kube.Config{REST: c.PortalServiceAccount(t)})
	if err != nil {
		t.Fatal(err)
	}
	ns := c.Namespace(t)
	ref := vdi.Ref{Namespace: ns, Name: "old-1"}
	testcluster.StoppedVM(t, c.AdminClient(t), ns, ref.Name, map[string]string{vdi.LabelPool: "old"})
	if err := vms.Start(t.Context(), ref); err != nil {
		t.Fatal(err)
	}
	_, err = vms.Screenshot(t.Context(), ref)
	if !errors.Is(err, vdi.ErrNoScreenshot) {
		t.Fatalf("Screenshot on KubeVirt < 1.7: %v; want vdi.ErrNoScreenshot", err)
	}
	t.Logf("refusal: %v", err)
	conn, err := vms.Dial(t.Context(), ref, vdi.ProtocolVNC)
	if err != nil {
		t.Fatalf("the fallback, VNC at the VMI's IP: %v", err)
	}
	defer conn.Close()
	img, err := snapshot.Take(conn, 320, time.Now().Add(10*time.Second))
	if err != nil || img.Bounds().Size().X != 320 {
		t.Fatalf("fallback thumbnail %v, %v; want 320 wide", sizeOf(img), err)
	}
	if n := standIn.Screenshots(ns, ref.Name); n != 0 {
		t.Errorf("the stand-in served %d screenshots; want none on KubeVirt < 1.7", n)
	}
}

// stillOpen reports nil while conn is connected and silent: a read that
// times out rather than ending.
func stillOpen(conn net.Conn) error {
	conn.SetReadDeadline(time.Now().Add(time.Second))
	defer conn.SetReadDeadline(time.Time{})
	_, err := conn.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	if err == nil {
		return errors.New("it sent bytes nobody asked for")
	}
	return err
}

func sizeOf(img *image.RGBA) image.Point {
	if img == nil {
		return image.Point{}
	}
	return img.Bounds().Size()
}
