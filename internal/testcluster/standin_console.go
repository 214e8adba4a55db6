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
//
// One VNC and one serial client per VMI, as virt-handler keeps: a new
// connection kicks the one before, whose stream then ends without a close
// frame (virt-handler closes the socket); a VNC connection asking
// ?preserveSession=true (KubeVirt 1.7 on) is refused with 503 while
// another client holds the display instead.

var upgrader = websocket.Upgrader{Subprotocols: []string{"plain.kubevirt.io"}, CheckOrigin: func(*http.Request) bool { return true }}

// handleConsole is GET .../virtualmachineinstances/{name}/vnc|console.
// vnc is the guest's display: the same Xvnc its port 5900 serves (in
// KubeVirt, QEMU's VNC server, not the guest's). console stands for QEMU's
// serial console with a getty on it: each connection gets a fresh shell on
// a pty of the guest's desktop. A QEMU guest's are QEMU's own
// (standin_qemu.go).
func (s *KubeVirtStandIn) handleConsole(w http.ResponseWriter, r *http.Request) {
	ns, name, console := r.PathValue("ns"), r.PathValue("name"), r.PathValue("console")
	g := s.vmi(ns, name)
	if g == nil {
		writeStatus(w, http.StatusNotFound, "virtualmachineinstance "+ns+"/"+name+" not found or not running")
		return
	}
	preserve, _ := strconv.ParseBool(r.URL.Query().Get("preserveSession"))
	if console != "vnc" {
		preserve = false // only vnc takes the parameter
	}
	kick, release, ok := g.takeConsole(console, preserve)
	if !ok {
		writeStatus(w, http.StatusServiceUnavailable, "the VNC console of virtualmachineinstance "+ns+"/"+name+
			" is in use by another client, and preserveSession keeps it")
		return
	}
	defer release()
	var conn net.Conn
	var err error
	switch console {
	case "vnc":
		conn, err = net.Dial("unix", g.displaySocket())
	case "console":
		conn, err = g.openSerial()
	default:
		writeStatus(w, http.StatusNotFound, "the stand-in does not serve virtualmachineinstances/"+console)
		return
	}
	if err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	serveStream(w, r, g, conn, kick)
}

// Kicked returns how many console clients of VMI namespace/name a newer
// client has closed, as virt-handler closes them, since it started.
func (s *KubeVirtStandIn) Kicked(namespace, name string) int {
	g := s.vmi(namespace, name)
	if g == nil {
		return 0
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.kicked
}

// ConsoleCounts are what one console of a VMI saw since it started: the
// clients it let in, those a newer client kicked, and those refused
// (preserveSession) while another held it. A second client while one is
// there is always kicked or refused.
type ConsoleCounts struct{ Opened, Kicked, Refused int }

// Consoles returns the counts of console ("vnc" or "console") of VMI
// namespace/name.
func (s *KubeVirtStandIn) Consoles(namespace, name, console string) ConsoleCounts {
	return s.vmi(namespace, name).consoleCounts(console)
}

// Holding reports whether a client holds console ("vnc" or "console") of
// VMI namespace/name now.
func (s *KubeVirtStandIn) Holding(namespace, name, console string) bool {
	return s.vmi(namespace, name).holding(console)
}

// consoleCounts returns the counts of g's console; none for a nil g (no
// such guest).
func (g *standInVMI) consoleCounts(console string) ConsoleCounts {
	if g == nil {
		return ConsoleCounts{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.counts[console]
}

// holding reports whether a client holds g's console now.
func (g *standInVMI) holding(console string) bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	_, held := g.viewers[console]
	return held
}

// takeConsole makes the caller console's one client: it kicks the client
// before, or with preserve refuses (false) while there is one. release
// ends the caller's hold unless a later client took over.
func (g *standInVMI) takeConsole(console string, preserve bool) (kick <-chan struct{}, release func(), ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.counts == nil {
		g.counts = map[string]ConsoleCounts{}
	}
	n := g.counts[console]
	defer func() { g.counts[console] = n }()
	if old, held := g.viewers[console]; held {
		if preserve {
			n.Refused++
			return nil, nil, false
		}
		close(old)
		g.kicked++
		n.Kicked++
	}
	n.Opened++
	mine := make(chan struct{})
	g.viewers[console] = mine
	return mine, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if g.viewers[console] == mine {
			delete(g.viewers, console)
		}
	}, true
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
	serveStream(w, r, g, conn, nil)
}

// serveStream upgrades the request and pipes it to conn until either side
// ends, the guest stops, or kick closes (another client took the console:
// the websocket's connection is closed without a close frame).
func serveStream(w http.ResponseWriter, r *http.Request, g *standInVMI, conn net.Conn, kick <-chan struct{}) {
	defer conn.Close()
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	ended := make(chan struct{})
	defer close(ended)
	go func() {
		select {
		case <-kick:
			ws.NetConn().Close()
			conn.Close()
		case <-ended:
		}
	}()
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
