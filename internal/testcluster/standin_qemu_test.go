package testcluster_test

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/kube"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestKubeVirtStandIn_QEMUGuest: a VM whose template asks for a virtio
// video device runs a real QEMU with KubeVirt's display, one virtio-vga
// head (max_outputs=1) with one VNC server. Booted, its vnc subresource
// through the apiserver is QEMU's VNC server, whose frame is QEMU's own
// screendump (the guest's driver's 1280x800 framebuffer), vnc/screenshot
// is that screendump, console is the guest's serial login, its IP
// refuses 5900 and 3389 (the guest has no servers), and stopping the VM
// ends QEMU. One boot, under the local VMs' accelerator (TCG where KVM
// does not run guests), so its waits are long.
func TestKubeVirtStandIn_QEMUGuest(t *testing.T) {
	ctx := context.Background()
	c := testcluster.Shared(t)
	s := c.StartKubeVirtStandIn(t)
	admin := c.AdminClient(t)
	ns := c.Namespace(t)
	vms, err := kube.NewVMs(kube.Config{REST: c.Config, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	vm := testcluster.StoppedVM(t, admin, ns, "q-1", map[string]string{vdi.LabelPool: "q"})
	if err := testcluster.Update(ctx, admin, vm, func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Video: &kubevirtv1.VideoDevice{Type: kubevirtv1.VirtIO}}}}}
	}); err != nil {
		t.Fatal(err)
	}
	before := len(children(t, "qemu-system-x86"))
	ref := vdi.Ref{Namespace: ns, Name: "q-1"}
	if err := vms.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	qemu := children(t, "qemu-system-x86")
	if len(qemu) != before+1 {
		t.Fatalf("%d QEMU children of the test once q-1 runs; want %d", len(qemu), before+1)
	}

	t.Run("KubeVirtsDisplay", func(t *testing.T) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(qemu[len(qemu)-1]) + "/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		args := strings.Split(string(b), "\x00")
		vncs, device := 0, ""
		for i, a := range args {
			if a == "-vnc" {
				vncs++
			}
			if a == "-device" && i+1 < len(args) && strings.HasPrefix(args[i+1], "virtio-vga") {
				device = args[i+1]
			}
		}
		if vncs != 1 || !strings.Contains(device, "max_outputs=1") {
			t.Errorf("QEMU runs with %d -vnc and -device %q; want one of each, a virtio-vga with max_outputs=1 (KubeVirt's display)", vncs, device)
		}
	})

	// Booted: the guest's virtio-gpu driver has made its framebuffer,
	// 1280x800 (its VGA text screen before is 720x400).
	var dump image.Image
	if !eventually(3*time.Minute, func() bool {
		dump, err = s.Screendump(ns, "q-1")
		return err == nil && dump.Bounds().Size() == image.Pt(1280, 800)
	}) {
		t.Fatalf("QEMU's screendump of q-1 after 3 minutes: %v, %v; want the guest's 1280x800 framebuffer", sizeOf(dump), err)
	}

	t.Run("VNCIsQEMUs", func(t *testing.T) {
		frame, dump := steadily(t, s, ns, "q-1", func() (image.Image, error) {
			ws, res, err := subresource(t, c.Config, ns, "q-1", "vnc")
			if err != nil {
				return nil, fmt.Errorf("vnc of q-1: %v (%v)", err, res)
			}
			defer ws.Close()
			return snapshot.Take(relay.NewWSConn(ws, relay.WSConnOptions{}), 0, time.Now().Add(time.Minute))
		})
		// The same picture but, at most, the login prompt's blinking cursor.
		if n := differing(frame, dump); n > 8*16 {
			t.Errorf("the vnc subresource's frame (%v) and QEMU's screendump (%v) differ in %d pixels; want the same picture", sizeOf(frame), sizeOf(dump), n)
		}
	})

	t.Run("Screenshot", func(t *testing.T) {
		tlsCfg, err := rest.TLSConfigFor(c.Config)
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}, Timeout: time.Minute}
		shot, dump := steadily(t, s, ns, "q-1", func() (image.Image, error) {
			res, err := hc.Get(strings.TrimSuffix(c.Config.Host, "/") + "/apis/subresources.kubevirt.io/v1/namespaces/" + ns + "/virtualmachineinstances/q-1/vnc/screenshot")
			if err != nil {
				return nil, err
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			shot, err := png.Decode(bytes.NewReader(b))
			if res.StatusCode != 200 || err != nil {
				return nil, fmt.Errorf("vnc/screenshot of q-1: %d, %v: %.200s", res.StatusCode, err, b)
			}
			return shot, nil
		})
		if n := differing(shot, dump); n > 8*16 {
			t.Errorf("vnc/screenshot (%v) and QEMU's screendump (%v) differ in %d pixels; want the same picture", sizeOf(shot), sizeOf(dump), n)
		}
	})

	t.Run("SerialLogin", func(t *testing.T) {
		ws, res, err := subresource(t, c.Config, ns, "q-1", "console")
		if err != nil {
			t.Fatalf("console of q-1: %v (%v)", err, res)
		}
		defer ws.Close()
		user, password := s.GuestLogin(ns, "q-1")
		if user == "" || password == "" {
			t.Fatalf("GuestLogin of q-1 = %q, %q; want root's", user, password)
		}
		conn := relay.NewWSConn(ws, relay.WSConnOptions{})
		conn.SetDeadline(time.Now().Add(2 * time.Minute))
		var seen strings.Builder
		until := func(want string) {
			t.Helper()
			b := make([]byte, 512)
			for !strings.Contains(seen.String(), want) {
				n, err := conn.Read(b)
				seen.Write(b[:n])
				if err != nil {
					t.Fatalf("q-1's serial console: %v; want %q in:\n%s", err, want, seen.String())
				}
			}
			seen.Reset()
		}
		// login flushes what was typed before its prompt: one line at a time.
		for _, step := range []struct{ send, want string }{{"\r", "login: "}, {user + "\r", "Password: "}, {password + "\r", "# "}, {"echo serial-$((6*7))\r", "serial-42"}} {
			if _, err := conn.Write([]byte(step.send)); err != nil {
				t.Fatal(err)
			}
			until(step.want)
			time.Sleep(300 * time.Millisecond)
		}
	})

	t.Run("NoServersAtItsIP", func(t *testing.T) {
		var vmi kubevirtv1.VirtualMachineInstance
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "q-1"}, &vmi); err != nil || len(vmi.Status.Interfaces) != 1 {
			t.Fatalf("VMI q-1: %v, interfaces %+v; want one", err, vmi.Status.Interfaces)
		}
		for _, port := range []string{"5900", "3389"} {
			addr := net.JoinHostPort(vmi.Status.Interfaces[0].IP, port)
			if conn, err := net.DialTimeout("tcp", addr, 5*time.Second); err == nil {
				conn.Close()
				t.Errorf("%s answers; want it refused (the guest has no servers)", addr)
			}
		}
	})

	if err := vms.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if !eventually(time.Minute, func() bool { return len(children(t, "qemu-system-x86")) == before }) {
		t.Errorf("QEMU children a minute after q-1 stopped: %d; want %d", len(children(t, "qemu-system-x86")), before)
	}
}

// subresource opens virtualmachineinstances/{name}/{sub} (vnc, console)
// of VMI ns/name through the apiserver as cfg.
func subresource(t *testing.T, cfg *rest.Config, ns, name, sub string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u := "wss" + strings.TrimPrefix(strings.TrimSuffix(cfg.Host, "/"), "https") + "/apis/subresources.kubevirt.io/v1/namespaces/" + ns +
		"/virtualmachineinstances/" + name + "/" + sub
	h := http.Header{}
	if cfg.BearerToken != "" {
		h.Set("Authorization", "Bearer "+cfg.BearerToken)
	}
	d := websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{kube.SubprotocolKubeVirt}}
	return d.Dial(u, h)
}

// steadily returns what capture took of VMI ns/name and QEMU's screendump
// of it, taken while the guest's screen held still: a booting guest
// still writes to its console after its framebuffer appears, so a capture
// is bracketed by two screendumps and taken again (up to five times) when
// they differ in more than the blinking cursor.
func steadily(t *testing.T, s *testcluster.KubeVirtStandIn, ns, name string, capture func() (image.Image, error)) (image.Image, image.Image) {
	t.Helper()
	moved := 0
	for range 5 {
		before, err := s.Screendump(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		got, err := capture()
		if err != nil {
			t.Fatal(err)
		}
		after, err := s.Screendump(ns, name)
		if err != nil {
			t.Fatal(err)
		}
		if moved = differing(before, after); moved <= 8*16 {
			return got, after
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("%s/%s's screen changed in %d pixels across each of five captures; want it still once booted", ns, name, moved)
	return nil, nil
}

// differing counts the pixels a and b differ in; pictures of two sizes
// differ in every pixel of the larger.
func differing(a, b image.Image) int {
	if a.Bounds().Size() != b.Bounds().Size() {
		s := a.Bounds().Size().Add(b.Bounds().Size())
		return s.X * s.Y
	}
	n := 0
	ao, bo := a.Bounds().Min, b.Bounds().Min
	for y := range a.Bounds().Dy() {
		for x := range a.Bounds().Dx() {
			r1, g1, b1, _ := a.At(ao.X+x, ao.Y+y).RGBA()
			r2, g2, b2, _ := b.At(bo.X+x, bo.Y+y).RGBA()
			if r1>>8 != r2>>8 || g1>>8 != g2>>8 || b1>>8 != b2>>8 {
				n++
			}
		}
	}
	return n
}

// sizeOf names an image's size, or none.
func sizeOf(img image.Image) string {
	if img == nil {
		return "none"
	}
	return img.Bounds().Size().String()
}

// eventually reports whether ok holds within d, polling.
func eventually(d time.Duration, ok func() bool) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if ok() {
			return true
		}
	}
	return ok()
}
