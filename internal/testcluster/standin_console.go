package testcluster

import (
	"net"
	"net/http"
	"strconv"

	"github.com/gorilla/websocket"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TEST-ONLY: the stand-in's console subresources, as virt-handler serves
// them: websockets with subprotocol plain.kubevirt.io carrying raw bytes in
// binary messages (text messages are dropped, as KubeVirt drops them).

var upgrader = websocket.Upgrader{Subprotocols: []string{"plain.kubevirt.io"}, CheckOrigin: func(*http.Request) bool { return true }}

// handleConsole is GET .../virtualmachineinstances/{name}/vnc|console.
// vnc is the guest's display: the same Xvnc its port 5900 serves (in
// KubeVirt, QEMU's VNC server, not the guest's). console stands for QEMU's
// serial console with a getty on it: each connection gets a fresh shell on
// a pty of the guest's desktop.
func (s *KubeVirtStandIn) handleConsole(w http.ResponseWriter, r *http.Request) {
	ns, name, console := r.PathValue("ns"), r.PathValue("name"), r.PathValue("console")
	g := s.vmi(ns, name)
	if g == nil {
		writeStatus(w, http.StatusNotFound, "virtualmachineinstance "+ns+"/"+name+" not found or not running")
		return
	}
	var conn net.Conn
	var err error
	switch console {
	case "vnc":
		conn, err = net.Dial("unix", g.desktop.VNCSocket())
	case "console":
		conn, err = g.desktop.StartTerminal()
	default:
		writeStatus(w, http.StatusNotFound, "the stand-in does not serve virtualmachineinstances/"+console)
		return
	}
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	s.serveStream(w, r, g, conn)
}

// handlePortForward is GET
// .../virtualmachineinstances/{name}/portforward/{port}/{proto}: as
// virt-api does, a TCP connection to the address the VMI reports first in
// status.interfaces, whatever it is (a guest agent may have reported
// another VM's IP). With no interfaces it answers 400; with an empty IP
// virt-api dials ":port" on its own host, which the stand-in does not do
// (something of the test machine's might listen there): it answers the
// 500 a virt-api with nothing on that port gives.
func (s *KubeVirtStandIn) handlePortForward(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	port, err := strconv.ParseUint(r.PathValue("port"), 10, 16)
	if err != nil || port == 0 {
		writeStatus(w, http.StatusBadRequest, "port "+strconv.Quote(r.PathValue("port"))+" is not a port number")
		return
	}
	if r.PathValue("proto") != "tcp" {
		writeStatus(w, http.StatusBadRequest, "the stand-in forwards tcp only, not "+r.PathValue("proto"))
		return
	}
	g := s.vmi(ns, name)
	var vmi kubevirtv1.VirtualMachineInstance
	if g == nil || s.cl.Get(r.Context(), client.ObjectKey{Namespace: ns, Name: name}, &vmi) != nil {
		writeStatus(w, http.StatusNotFound, "virtualmachineinstance "+ns+"/"+name+" not found or not running")
		return
	}
	if len(vmi.Status.Interfaces) == 0 {
		writeStatus(w, http.StatusBadRequest, "no network interfaces are present")
		return
	}
	addr := net.JoinHostPort(vmi.Status.Interfaces[0].IP, strconv.FormatUint(port, 10))
	if vmi.Status.Interfaces[0].IP == "" {
		writeStatus(w, http.StatusInternalServerError, "dialing VM: dial tcp "+addr+": connect: connection refused")
		return
	}
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, "dialing VM: "+err.Error())
		return
	}
	s.serveStream(w, r, g, conn)
}

// serveStream upgrades the request and pipes it to conn until either side
// ends or the guest stops.
func (s *KubeVirtStandIn) serveStream(w http.ResponseWriter, r *http.Request, g *standInVMI, conn net.Conn) {
	defer conn.Close()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	// Tracked with the guest's connections, so that stopping the guest
	// ends its console sessions.
	g.mu.Lock()
	g.conns[conn] = struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.conns, conn)
		g.mu.Unlock()
	}()
	go func() {
		defer conn.Close()
		for {
			typ, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if typ != websocket.BinaryMessage {
				continue
			}
			if _, err := conn.Write(msg); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			if werr := ws.WriteMessage(websocket.BinaryMessage, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
