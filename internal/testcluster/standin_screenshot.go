package testcluster

import (
	"bytes"
	"net"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/corral-dev/corral-vdi-portal/snapshot"
)

// TEST-ONLY: the stand-in's vnc/screenshot, as KubeVirt 1.7's virt-api
// and virt-handler serve it: a PNG of the guest's display, taken without
// a VNC session of the VMI's (libvirt reads QEMU's framebuffer), so the
// display's one client stays connected. Here the picture comes from the
// guest's Xvnc over a shared connection of its own, outside takeConsole's
// one-client rule; a QEMU guest's is QEMU's screendump, as libvirt's
// (standin_qemu.go). virt-api writes the bytes with no Content-Type of
// libvirt's; the stand-in says image/png.

// WithoutScreenshots makes the stand-in a KubeVirt older than 1.7: its
// discovery document no longer lists virtualmachineinstances/vnc/screenshot
// and the route answers 404, as an older virt-api's router does. It holds
// for the whole stand-in (discovery is cluster-wide): use it on a cluster
// of the test's own.
func (s *KubeVirtStandIn) WithoutScreenshots() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noShots = true
}

// ForgeScreenshot makes the screenshots of VMI namespace/name answer b
// instead of the display: what a hostile guest's mode (a huge screen)
// makes libvirt send, for attack tests.
func (s *KubeVirtStandIn) ForgeScreenshot(namespace, name string, b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.forged[namespace+"/"+name] = b
}

// Screenshots returns how many screenshots of VMI namespace/name the
// stand-in has served, so that a test tells this path from a VNC one.
func (s *KubeVirtStandIn) Screenshots(namespace, name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.shots[namespace+"/"+name]
}

// resources is the discovery document's list: the 1.7 one, or without
// the screenshot under WithoutScreenshots.
func (s *KubeVirtStandIn) resources() []metav1.APIResource {
	s.mu.Lock()
	old := s.noShots
	s.mu.Unlock()
	var out []metav1.APIResource
	for _, r := range standInResources {
		if old && r.Name == "virtualmachineinstances/vnc/screenshot" {
			continue
		}
		out = append(out, r)
	}
	return out
}

// handleScreenshot is GET .../virtualmachineinstances/{name}/vnc/screenshot.
func (s *KubeVirtStandIn) handleScreenshot(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	s.mu.Lock()
	old := s.noShots
	s.mu.Unlock()
	if old {
		http.NotFound(w, r)
		return
	}
	g := s.vmi(ns, name)
	if g == nil {
		writeStatus(w, http.StatusNotFound, "virtualmachineinstance "+ns+"/"+name+" not found or not running")
		return
	}
	s.mu.Lock()
	forged, ok := s.forged[ns+"/"+name]
	if ok {
		s.shots[ns+"/"+name]++
	}
	s.mu.Unlock()
	if ok {
		w.Write(forged)
		return
	}
	png, err := displayPNG(g)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "Failed to call libvirt's Screenshot API: "+err.Error())
		return
	}
	s.mu.Lock()
	s.shots[ns+"/"+name]++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "image/png")
	w.Write(png)
}

// displayPNG takes a PNG of g's display: a QEMU guest's screendump, or
// the desktop's over a shared VNC connection of its own. No console
// client is kicked.
func displayPNG(g *standInVMI) ([]byte, error) {
	if g.vm != nil {
		return g.screendump() // standin_qemu.go
	}
	conn, err := net.Dial("unix", g.desktop.VNCSocket())
	if err != nil {
		return nil, err
	}
	img, err := snapshot.Take(conn, 0, time.Now().Add(10*time.Second))
	conn.Close()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := snapshot.PNG(&buf, img); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
