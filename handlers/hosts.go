package handlers

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// hostPolicy is the Host allow-list and the origins a browser may send
// from. A page on a name the attacker controls that resolves to the
// portal's address (DNS rebinding) is "same origin" to itself, so every
// Origin and Sec-Fetch check would pass: only the Host header tells it
// apart, and it is checked before anything is routed.
type hostPolicy struct {
	listenHost string          // lowercased; "" or an unspecified IP for all addresses
	public     map[string]bool // hostnames of the public origins
	https      map[string]bool // hostnames of the public https origins
	origins    map[string]bool // normalised public origins, scheme://host[:port]
}

// newHostPolicy returns the policy for a portal listening on listen and
// reached at the public origins publicURLs (full URLs; only their origin
// counts).
func newHostPolicy(listen string, publicURLs []string) *hostPolicy {
	p := &hostPolicy{public: map[string]bool{}, https: map[string]bool{}, origins: map[string]bool{}}
	if h, _, err := net.SplitHostPort(listen); err == nil {
		p.listenHost = normHost(h)
	}
	for _, s := range publicURLs {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" {
			continue
		}
		p.public[normHost(u.Hostname())] = true
		p.https[normHost(u.Hostname())] = u.Scheme == "https"
		p.origins[normOrigin(u)] = true
	}
	return p
}

// normHost lowercases a host name and drops a trailing dot and brackets.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.Trim(h, "[]")), ".")
	return h
}

// normOrigin returns u's origin as browsers send it: scheme://host with
// the port only when it is not the scheme's default.
func normOrigin(u *url.URL) string {
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}

// hostOf returns the hostname of a Host header value.
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return normHost(h)
	}
	return normHost(hostport)
}

// allowedHost reports whether a request's Host names the portal: a
// loopback name or literal, the listen address, or a public origin. An IP
// literal is fine when the portal listens on all addresses: rebinding
// needs a name, and a browser only sends an IP literal it was sent to.
func (p *hostPolicy) allowedHost(hostport string) bool {
	host := hostOf(hostport)
	switch {
	case host == "":
		return false
	case auth.IsLoopbackHost(host), p.public[host], host == p.listenHost:
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	listen, err := netip.ParseAddr(p.listenHost)
	return p.listenHost == "" || (err == nil && listen.IsUnspecified()) || (err == nil && listen.Unmap() == ip.Unmap())
}

// allowedOrigin reports whether origin, sent by a browser on r, is one of
// the portal's own: a public origin exactly, or, for a Host that is not a
// public name, the request's own scheme, host and port.
func (p *hostPolicy) allowedOrigin(r *http.Request, origin string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false
	}
	o := normOrigin(u)
	if p.origins[o] {
		return true
	}
	if p.public[hostOf(r.Host)] || !p.allowedHost(r.Host) {
		return false // a public name only at its public origin
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	self, err := url.Parse(scheme + "://" + r.Host)
	return err == nil && o == normOrigin(self)
}

// servedOverHTTPS reports whether r reached the portal over TLS: its own,
// or a proxy's in front of a public https origin.
func (p *hostPolicy) servedOverHTTPS(r *http.Request) bool {
	return r.TLS != nil || p.https[hostOf(r.Host)]
}

// checkOrigin reports whether r carries no Origin (not a browser) or one
// of the portal's own; websocket upgrades use it.
func (h *hostCheck) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	return origin == "" || h.hosts.allowedOrigin(r, origin)
}

// unsafeMethod reports whether a request of this method may change state.
func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// exemptFromHostCheck reports whether a path serves callers that are
// neither browsers nor cookie holders, so the Host says nothing about
// them: probes (kubelet uses the pod IP or a Service name) and peer
// portals (each link is signed).
func exemptFromHostCheck(path string) bool {
	return path == "/healthz" || path == "/readyz" || strings.HasPrefix(path, "/peer/v1/")
}

// guardHost answers a request for an unknown Host with 421, and an unsafe
// request from a foreign Origin with 403, and reports whether it did.
func (h *hostCheck) guardHost(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := auth.TrustedIdentity(r.Context()); ok {
		return false // the admin socket: no browser, its peer is authenticated by the kernel
	}
	if !exemptFromHostCheck(r.URL.Path) && !h.hosts.allowedHost(r.Host) {
		h.refuse(w, r, "Unknown host", vdi.Errorf(vdi.EMisdirected,
			"Open the portal at its own address; an operator who serves it under this name adds it to CORRAL_VDI_PUBLIC_URL (e.g. https://"+hostOf(r.Host)+").",
			"This portal does not answer to the name %s.", hostOf(r.Host)))
		return true
	}
	if origin := r.Header.Get("Origin"); unsafeMethod(r.Method) && origin != "" && !h.hosts.allowedOrigin(r, origin) {
		h.refuse(w, r, "Cross-origin request refused", vdi.Errorf(vdi.EForbidden,
			"Use the portal's own pages; an operator who serves it at another origin adds it to CORRAL_VDI_PUBLIC_URL.",
			"The portal refused a request sent from %s.", origin))
		return true
	}
	return false
}

// refuse answers a request refused before routing or sign-in: JSON for
// the API and websockets, a page titled title for browsers.
func (h *hostCheck) refuse(w http.ResponseWriter, r *http.Request, title string, err error) {
	if wantsJSON(r) {
		h.writeAPIError(w, r, err)
		return
	}
	h.writePageError(w, r, vdi.Identity{}, title, err)
}

// wantsJSON reports whether r is an API or websocket call rather than a
// page load.
func wantsJSON(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.HasPrefix(r.URL.Path, "/ws/") || strings.HasPrefix(r.URL.Path, "/peer/") ||
		r.URL.Path == "/metrics" || !strings.Contains(r.Header.Get("Accept"), "text/html") && r.Header.Get("Sec-Fetch-Dest") != "document"
}
