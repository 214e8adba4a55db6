package portal

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Connection caps per client address. A trusted proxy (tailscale serve,
// nginx) carries every user's connections, so it gets more room.
const (
	DefaultMaxConnsPerClient = 64
	DefaultMaxConnsPerProxy  = 512
)

// connLimiter is a listener that caps the open connections of each client
// address: one client holding idle keep-alive connections or trickling
// bodies must not use up the process's file descriptors for everyone.
// A connection over the cap gets a 429 and is closed at once.
type connLimiter struct {
	net.Listener
	perClient, perProxy int
	proxies             []netip.Prefix

	mu   sync.Mutex
	open map[netip.Addr]int
}

func newConnLimiter(ln net.Listener, perClient, perProxy int, proxies []netip.Prefix) *connLimiter {
	return &connLimiter{Listener: ln, perClient: perClient, perProxy: perProxy, proxies: proxies, open: map[netip.Addr]int{}}
}

// tooManyBody and tooMany are what a connection over the cap reads
// before it is closed.
const tooManyBody = `{"error":"Too many open connections from your address.","hint":"Close idle tabs or clients: each address may keep 64 connections open (a trusted proxy 512)."}` + "\n"

var tooMany = fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 5\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(tooManyBody), tooManyBody)

// Accept implements net.Listener.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := addrOf(c.RemoteAddr())
		if l.take(ip) {
			return &limitedConn{Conn: c, release: func() { l.put(ip) }}, nil
		}
		go func() { // never block Accept on a slow client
			c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte(tooMany))
			c.Close()
		}()
	}
}

func addrOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (l *connLimiter) take(ip netip.Addr) bool {
	limit := l.perClient
	for _, p := range l.proxies {
		if p.Contains(ip) {
			limit = l.perProxy
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && l.open[ip] >= limit {
		return false
	}
	l.open[ip]++
	return true
}

func (l *connLimiter) put(ip netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip]--; l.open[ip] <= 0 {
		delete(l.open, ip)
	}
}

// limitedConn gives its slot back when closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

// Close implements net.Conn.
func (c *limitedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
