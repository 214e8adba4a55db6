package testcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"time"
)

// A stand-in guest on the network: the loopback IP it listens on, the
// forwarders from there to the desktop standing for it, and its leaving
// at a live migration.

// listenGuestIP picks a free loopback IP 127.77.x.y (random, since other
// test processes run stand-ins of their own) and listens on its VNC and
// RDP ports.
func listenGuestIP() (vnc, rdp net.Listener, err error) {
	for range 64 {
		ip := fmt.Sprintf("127.77.%d.%d", rand.IntN(256), 1+rand.IntN(254))
		if vnc, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(standInPortVNC))); err != nil {
			continue
		}
		if rdp, err = net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(standInPortRDP))); err != nil {
			vnc.Close()
			continue
		}
		return vnc, rdp, nil
	}
	return nil, nil, fmt.Errorf("no free loopback IP in 127.77.0.0/16 for a guest: %w", err)
}

// waitRFB dials addr until a VNC server greets with its RFB version.
func waitRFB(ctx context.Context, network, addr string) error {
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, network, addr)
		if err == nil {
			conn.SetDeadline(time.Now().Add(5 * time.Second))
			var line string
			line, err = bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if err == nil && len(line) == 12 && line[:4] == "RFB " {
				return nil
			} else if err == nil {
				err = fmt.Errorf("greeting %q is not RFB", line)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// arrive serves the guest's VNC and RDP on the listeners at its IP; a
// QEMU guest has no servers of its own, so both refuse.
func (g *standInVMI) arrive(vnc, rdp net.Listener) {
	g.mu.Lock()
	g.ip, g.lns = vnc.Addr().(*net.TCPAddr).IP.String(), []net.Listener{vnc, rdp}
	g.mu.Unlock()
	if g.vm != nil {
		vnc.Close()
		rdp.Close()
		return
	}
	g.forward(vnc, g.desktop.VNCSocket())
	if sock := g.desktop.RDPSocket(); sock != "" {
		g.forward(rdp, sock)
	} else {
		// A guest without an RDP server: 3389 refuses, as it would.
		rdp.Close()
	}
}

// address returns the guest's IP now.
func (g *standInVMI) address() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ip
}

// leave is the end of the guest at its IP when a live migration hands it
// over (the source's QEMU exits, its Pod's network goes): the listeners
// close, the display's console streams end, and the direct connections go
// silent — no more bytes and no FIN, as packets to an address that is gone
// get no answer. The desktop goes on, for arrive at the target.
func (g *standInVMI) leave() {
	g.mu.Lock()
	lns := g.lns
	g.lns = nil
	for a := range g.direct {
		g.silent[a] = true
	}
	for c := range g.conns {
		if !g.silent[c] {
			c.Close()
		}
	}
	g.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
}

// forward accepts on ln and pipes each connection to the Unix socket sock
// until ln closes.
func (g *standInVMI) forward(ln net.Listener, sock string) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if time.Now().Before(g.upAt) {
				c.Close() // still booting: nothing listens in the guest yet
				continue
			}
			g.wg.Add(1)
			go func() {
				defer g.wg.Done()
				defer c.Close()
				u, err := net.Dial("unix", sock)
				if err != nil {
					return
				}
				g.mu.Lock()
				g.direct[c] = u
				g.mu.Unlock()
				g.pipe(c, u)
			}()
		}
	}()
}

// pipe copies a and b both ways until either ends; stop closes both. A
// direct connection a migration left silent (a in g.silent) is not closed
// when its display side ends: it stays open, with nothing more on it, until
// its client gives up.
func (g *standInVMI) pipe(a, b net.Conn) {
	g.mu.Lock()
	g.conns[a], g.conns[b] = struct{}{}, struct{}{}
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.conns, a)
		delete(g.conns, b)
		delete(g.direct, a)
		delete(g.silent, a)
		g.mu.Unlock()
		a.Close()
		b.Close()
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(b, a)
		b.Close()
		if g.isSilent(a) {
			io.Copy(io.Discard, a) // no answer, no FIN
		}
	}()
	io.Copy(a, b)
	if !g.isSilent(a) {
		a.Close()
	}
	<-done
}

// isSilent reports whether a migration left direct connection a silent.
func (g *standInVMI) isSilent(a net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.silent[a]
}

// displaySocket is the Unix socket of the VNC server of the guest's
// display: QEMU's, or the Xvnc standing for it.
func (g *standInVMI) displaySocket() string {
	if g.vm != nil {
		return g.vm.VNCAddr()
	}
	return g.desktop.VNCSocket()
}

// openSerial opens the guest's serial console: QEMU's serial line, or a
// fresh shell on a pty of the desktop standing for it.
func (g *standInVMI) openSerial() (net.Conn, error) {
	if g.vm != nil {
		return net.Dial("unix", g.vm.SerialAddr())
	}
	return g.desktop.StartTerminal()
}
