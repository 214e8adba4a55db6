package portal

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/corral-dev/corral-vdi-portal/connid"
)

// hostAddrs lists this host's addresses other than loopback, each as a
// prefix with its device: every interface's, and every prefix the kernel
// delivers locally (connid.HostPrefixes), which includes a local route
// with no address record on any interface.
func hostAddrs() ([]connid.HostPrefix, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	var out []connid.HostPrefix
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
				ip = ip.Unmap()
				out = append(out, connid.HostPrefix{Prefix: netip.PrefixFrom(ip, ip.BitLen()), Dev: i.Name})
			}
		}
	}
	routed, err := connid.HostPrefixes()
	if err != nil {
		return nil, err
	}
	return append(out, routed...), nil
}

// checkTrustedProxies refuses, in one line, a trusted-proxy prefix that
// reaches an address of this host other than loopback, for when local
// desktops have a network: their traffic leaves through a user-mode stack
// on the host, which may connect to the portal from any such address
// (a Docker bridge's 172.17.0.1 is in 172.16.0.0/12). The connection's
// owner would still be checked (package connid), but a proxy rule that
// covers a desktop's way out is a mistake to stop at start. Loopback
// stays trusted: the stacks cannot reach the host's loopback.
func checkTrustedProxies(prefixes []netip.Prefix, host []connid.HostPrefix) error {
	for _, p := range prefixes {
		for _, h := range host {
			if p.Overlaps(h.Prefix) {
				rel, what := "covers", h.Prefix.String()
				if h.Prefix.IsSingleIP() {
					what = h.Prefix.Addr().String()
				} else if p.Bits() > h.Prefix.Bits() {
					rel = "lies in"
				}
				return fmt.Errorf("CORRAL_VDI_TRUSTED_PROXIES: %s %s %s (%s) of this host, which local desktops' network can connect from; trust loopback (127.0.0.1/32,::1/128) or other hosts' addresses only, and let a proxy on this host connect over loopback or CORRAL_VDI_LISTEN=unix:/run/corral-vdi/http.sock, or set CORRAL_VDI_DESKTOP_NETWORK=none", p, rel, what, h.Dev)
			}
		}
	}
	return nil
}
