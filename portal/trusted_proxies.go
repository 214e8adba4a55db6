package portal

import (
	"fmt"
	"net"
	"net/netip"
)

// hostAddr is one address of this host and its interface.
type hostAddr struct {
	addr netip.Addr
	dev  string
}

// hostAddrs lists this host's addresses other than loopback.
func hostAddrs() ([]hostAddr, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []hostAddr
	for _, i := range ifs {
		addrs, err := i.Addrs()
		if err != nil {
			return nil, err
		}
		for _, a := range addrs {
			n, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			if ip, ok := netip.AddrFromSlice(n.IP); ok && !ip.Unmap().IsLoopback() {
				out = append(out, hostAddr{ip.Unmap(), i.Name})
			}
		}
	}
	return out, nil
}

// checkTrustedProxies refuses, in one line, a trusted-proxy prefix that
// covers an address of this host other than loopback, for when local
// desktops have a network: their traffic leaves through a user-mode stack
// on the host, which may connect to the portal from any such address
// (a Docker bridge's 172.17.0.1 is in 172.16.0.0/12). The connection's
// owner would still be checked (package connid), but a proxy rule that
// covers a desktop's way out is a mistake to stop at start. Loopback
// stays trusted: the stacks cannot reach the host's loopback.
func checkTrustedProxies(prefixes []netip.Prefix, host []hostAddr) error {
	for _, p := range prefixes {
		for _, h := range host {
			if p.Contains(h.addr) {
				return fmt.Errorf("CORRAL_VDI_TRUSTED_PROXIES: %s covers %s (%s), an address of this host that local desktops' network can connect from; trust loopback (127.0.0.1/32,::1/128) or other hosts' addresses only, and let a proxy on this host connect over loopback or CORRAL_VDI_LISTEN=unix:/run/corral-vdi/http.sock, or set CORRAL_VDI_DESKTOP_NETWORK=none", p, h.addr, h.dev)
			}
		}
	}
	return nil
}
