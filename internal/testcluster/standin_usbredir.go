package testcluster

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// handleUSBRedir is GET .../virtualmachineinstances/{name}/usbredir: in
// KubeVirt, virt-handler hands the stream to one of the usb-redir chardevs
// of the VMI's QEMU, which exist only with clientPassthrough. The stand-in
// does the same with a real QEMU: a process with an xHCI controller and a
// usb-redir device (no guest to boot; QEMU speaks usbredir's "guest" side
// on its own), one per stream, gone when the stream ends.
func (s *KubeVirtStandIn) handleUSBRedir(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	g := s.vmi(ns, name)
	if g == nil {
		writeStatus(w, http.StatusNotFound, "virtualmachineinstance "+ns+"/"+name+" not found or not running")
		return
	}
	var vmi kubevirtv1.VirtualMachineInstance
	if err := s.cl.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &vmi); err != nil {
		writeStatus(w, http.StatusNotFound, err.Error())
		return
	}
	if vmi.Spec.Domain.Devices.ClientPassthrough == nil {
		writeStatus(w, http.StatusBadRequest, "virtualmachineinstance "+ns+"/"+name+" has no clientPassthrough: no usbredir devices")
		return
	}
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "the stand-in's usbredir needs qemu-system-x86_64: "+err.Error())
		return
	}
	dir, err := os.MkdirTemp(s.dir, "usb")
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "u.sock")
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu, "-accel", "tcg", "-m", "32", "-nodefaults", "-no-user-config", "-nic", "none", "-display", "none",
		"-device", "qemu-xhci,id=xhci",
		"-chardev", "socket,id=usbredir0,path="+sock+",server=on,wait=off",
		"-device", "usb-redir,chardev=usbredir0,id=usbredirdev0,bus=xhci.0")
	if err := cmd.Start(); err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	defer cmd.Wait()
	defer cancel()
	var conn net.Conn
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if conn, err = net.Dial("unix", sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			writeStatus(w, http.StatusInternalServerError, "the stand-in's QEMU usb-redir chardev did not listen: "+err.Error())
			return
		}
	}
	serveStream(w, r, g, conn, nil)
}
