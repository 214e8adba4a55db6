package portal

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/connid"
)

// Connection caps per client. A trusted proxy (tailscale serve, nginx)
// carries every user's connections, so it gets more room.
const (
	DefaultMaxConnsPerClient = 64
	DefaultMaxConnsPerProxy  = 512
)

// connLimiter is a listener that caps the open connections of each
// client: one client holding idle keep-alive connections or trickling
// bodies must not use up the process's file descriptors for everyone.
// A client is an address on another host, or on this host the owner of
// the connection (package connid's verdict): a desktop counts against
// its own uid and never against the allowance of the trusted proxy whose
// address (127.0.0.1) it shares. A connection over the cap gets a 429 and
// is closed at once.
type connLimiter struct {
	net.Listener
	perClient, perProxy int
	proxies             []netip.Prefix

	mu   sync.Mutex
	open map[string]int
}

func newConnLimiter(ln net.Listener, perClient, perProxy int, proxies []netip.Prefix) *connLimiter {
	return &connLimiter{Listener: ln, perClient: perClient, perProxy: perProxy, proxies: proxies, open: map[string]int{}}
}

// tooManyBody and tooMany are what a connection over the cap reads
// before it is closed.
const tooManyBody = `{"error":"Too many open connections from your address or account.","hint":"Close idle tabs or clients: each client may keep 64 connections open (a trusted proxy 512)."}` + "\n"

var tooMany = fmt.Sprintf("HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/json\r\nRetry-After: 5\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(tooManyBody), tooManyBody)

// Accept implements net.Listener.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, limit := l.client(c)
		if l.take(key, limit) {
			return connid.OnClose(c, func() { l.put(key) }), nil
		}
		go func() { // never block Accept on a slow client
			c.SetWriteDeadline(time.Now().Add(2 * time.Second))
			c.Write([]byte(tooMany))
			c.Close()
		}()
	}
}

// client names whom c counts against, and that client's cap.
func (l *connLimiter) client(c net.Conn) (key string, limit int) {
	v, ok := connid.VerdictOf(c)
	if !ok {
		v = connid.Verdict{Kind: connid.Remote, Addr: addrOf(c.RemoteAddr())}
	}
	switch {
	case v.Unix && v.Owned:
		key = "unix uid " + strconv.Itoa(v.UID)
		if v.Kind == connid.Host {
			return key, l.perProxy
		}
		return key, l.perClient
	case v.Owned:
		// A uid's connections from a trusted proxy's address and from
		// elsewhere count apart, each against its own cap.
		key = "uid " + strconv.Itoa(v.UID)
		if v.Kind == connid.Host && l.isProxy(v.Addr) {
			return key + " proxy", l.perProxy
		}
		return key, l.perClient
	case v.Kind == connid.Remote:
		if l.isProxy(v.Addr) {
			return "addr " + v.Addr.String(), l.perProxy
		}
		return "addr " + v.Addr.String(), l.perClient
	}
	return "unowned " + v.Addr.String(), l.perClient
}

// isProxy reports whether ip is a trusted proxy's address.
func (l *connLimiter) isProxy(ip netip.Addr) bool {
	for _, p := range l.proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func addrOf(a net.Addr) netip.Addr {
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return ap.Addr().Unmap()
	}
	return netip.Addr{}
}

func (l *connLimiter) take(key string, limit int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if limit > 0 && l.open[key] >= limit {
		return false
	}
	l.open[key]++
	return true
}

func (l *connLimiter) put(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[key]--; l.open[key] <= 0 {
		delete(l.open, key)
	}
}
