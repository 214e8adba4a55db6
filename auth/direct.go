package auth

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// IsLoopbackHost reports whether a hostname is a loopback address literal
// or a name browsers resolve to loopback themselves (localhost and
// *.localhost), so that no DNS answer can move it elsewhere.
func IsLoopbackHost(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// proxyHeaders are headers a reverse proxy adds; a request with any of
// them did not come straight from a browser on this machine.
var proxyHeaders = []string{"Forwarded", "Via", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "X-Forwarded-Port", "X-Real-Ip"}

// DirectLoopback returns nil when r came straight from a process (a
// browser, Prometheus) on this machine: a loopback peer, a loopback Host,
// and no header a proxy adds (X-Forwarded-*, Forwarded, Via,
// Tailscale-*). Signing in by name, or reading /metrics without a token,
// is safe only then: anyone who reaches the portal through tailscale
// serve, Funnel or nginx arrives from loopback too, but with such headers
// or another Host. The error says which check failed, that what (as
// "Signing in by name") is refused, and hint, what to do instead.
func DirectLoopback(r *http.Request, what, hint string) error {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip, err := netip.ParseAddr(host); err != nil || !ip.Unmap().IsLoopback() {
		return vdi.Errorf(vdi.EForbidden, hint, "%s is only offered on the portal's own machine, not to %s.", what, host)
	}
	reqHost := r.Host
	if h, _, err := net.SplitHostPort(reqHost); err == nil {
		reqHost = h
	}
	if !IsLoopbackHost(reqHost) {
		return vdi.Errorf(vdi.EForbidden, hint, "%s is only offered at a loopback address (127.0.0.1, [::1] or localhost), not at %s.", what, reqHost)
	}
	for _, name := range proxyHeaders {
		if r.Header.Get(name) != "" {
			return vdi.Errorf(vdi.EForbidden, hint, "%s is off for requests through a proxy (this one carries %s).", what, name)
		}
	}
	for name := range r.Header {
		if strings.HasPrefix(strings.ToLower(name), "tailscale-") {
			return vdi.Errorf(vdi.EForbidden, hint, "%s is off for requests through a proxy (this one carries %s).", what, name)
		}
	}
	return nil
}
