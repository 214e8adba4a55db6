package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// SubprotocolKubeVirt is the websocket subprotocol of KubeVirt's console
// streams: raw bytes in binary messages.
const SubprotocolKubeVirt = "plain.kubevirt.io"

// PathAPIServer is the name SubresourcePath is recorded under on sessions.
const PathAPIServer = "apiserver"

// SubresourcePath reaches a VM member's consoles through the apiserver's
// KubeVirt subresources (virt-api proxies them to the node): vnc for VNC,
// console for the serial console, and portforward/3389/tcp for RDP. It is
// the fallback when the portal cannot reach the VMI's IP itself: slower
// (two proxies) and one VNC viewer per VMI upstream, but it only needs the
// apiserver. It satisfies console.Path.
type SubresourcePath struct {
	dial  *dialer
	addrs *addresses
}

// NewSubresourcePath returns a SubresourcePath that authenticates as
// cfg.REST does: its TLS client certificate, bearer token or token file
// (re-read as it rotates), exec plugin or impersonation.
func NewSubresourcePath(c Config) (*SubresourcePath, error) {
	cfg := c.REST
	d, err := newDialer(cfg)
	if err != nil {
		return nil, fmt.Errorf("kube: console dialer: %w", err)
	}
	kv, err := kubevirtClient(cfg)
	if err != nil {
		return nil, err
	}
	addrs, err := newAddresses(cfg, kv)
	if err != nil {
		return nil, fmt.Errorf("kube: core client: %w", err)
	}
	return &SubresourcePath{dial: d, addrs: addrs}, nil
}

// Name returns "apiserver", the path recorded on sessions.
func (s *SubresourcePath) Name() string { return PathAPIServer }

// Dial opens console p of the VMI named like the member ref: VNC through
// the vnc subresource (the VMI's own display, not the guest's VNC server),
// serial through console, RDP through portforward to the guest's port 3389.
// virt-api's portforward dials the VMI's status.interfaces[0] address, so
// RDP is refused (a plain error: the handlers offer VNC instead) unless
// that address is set and the VMI's launcher Pod vouches for it. The
// caller has authorized ref.
func (s *SubresourcePath) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	var sub string
	switch p {
	case vdi.ProtocolVNC:
		// One VNC client per VMI upstream: a new one kicks the old (whose
		// stream then ends cleanly, see relay.WSConnOptions); a client that
		// asks to preserve the session (KubeVirt 1.7 on) gets 503 instead.
		// The portal holds one connection per desktop cluster-wide
		// (console.Screens) and asks: a replica that raced an owner not yet
		// gone gets a 503 and its client retries, and nobody is kicked.
		sub = "vnc?preserveSession=true"
	case vdi.ProtocolSerial:
		sub = "console"
	case vdi.ProtocolRDP:
		if err := s.addrs.portForwardTarget(ctx, ref); err != nil {
			return nil, err
		}
		sub = "portforward/" + strconv.Itoa(PortRDP) + "/tcp"
	default:
		return nil, vdi.Errorf(vdi.EInvalid, "VM desktops offer rdp, vnc and serial.", "VM %s has no %s console.", ref, p)
	}
	return s.dial.open(ctx, ref, sub)
}

// serialCloseWait bounds how long closing a serial console waits for
// virt-handler to answer the close (relay.WSConnOptions.CloseWait): it
// takes one client, and lets the line go only once it has read the close,
// behind any input the guest has not taken yet; the portal gives the line
// to the next console only then. It is shorter than the wait of the next
// console for the line (console.Streams).
const serialCloseWait = 5 * time.Second

// dialer opens KubeVirt console websockets through the apiserver with the
// rest.Config's TLS and credentials. The credentials are not copied once:
// each dial runs the config's own client-go auth wrappers (a
// BearerTokenFile re-read as the kubelet rotates a projected token, exec
// plugins, impersonation) on a request that goes nowhere, and sends the
// headers they set. A handshake refused with 401 re-reads the token file
// at once and tries again: client-go caches the file for a minute.
type dialer struct {
	base      *url.URL
	ws        websocket.Dialer
	auth      http.RoundTripper // cfg's wrappers around captureHeaders
	tokenFile string
}

func newDialer(cfg *rest.Config) (*dialer, error) {
	tlsCfg, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	base, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	switch base.Scheme {
	case "https":
		base.Scheme = "wss"
	case "http":
		base.Scheme = "ws"
	}
	auth, err := rest.HTTPWrappersForConfig(cfg, captureHeaders{})
	if err != nil {
		return nil, err
	}
	return &dialer{base: base, auth: auth, tokenFile: cfg.BearerTokenFile,
		ws: websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{SubprotocolKubeVirt}, Proxy: http.ProxyFromEnvironment}}, nil
}

// captureHeaders is the end of a RoundTripper chain that sends nothing: it
// answers with the request's headers, as the wrappers before it set them.
type captureHeaders struct{}

func (captureHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: req.Header.Clone(), Body: http.NoBody, Request: req}, nil
}

// headers returns what the config's wrappers put on a request to u; with
// token set, that bearer token instead of theirs.
func (d *dialer) headers(ctx context.Context, u string, token string) (http.Header, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.Replace(u, "ws", "http", 1), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := d.auth.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("kube: credentials for the apiserver: %w", err)
	}
	res.Body.Close()
	// Headers the websocket handshake sets itself must not be doubled.
	for _, k := range []string{"Upgrade", "Connection", "Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", "Sec-Websocket-Protocol"} {
		res.Header.Del(k)
	}
	return res.Header, nil
}

// open dials subresource sub (e.g. "vnc", "portforward/3389/tcp", with a
// query after "?") of the VMI ref. A refusal names the apiserver's status
// and message, e.g. 404 for a VMI that does not exist, 403 for RBAC.
func (d *dialer) open(ctx context.Context, ref vdi.Ref, sub string) (net.Conn, error) {
	u := *d.base
	sub, u.RawQuery, _ = strings.Cut(sub, "?")
	u.Path = strings.TrimSuffix(u.Path, "/") + "/apis/subresources.kubevirt.io/v1/namespaces/" + url.PathEscape(ref.Namespace) +
		"/virtualmachineinstances/" + url.PathEscape(ref.Name) + "/" + sub
	h, err := d.headers(ctx, u.String(), "")
	if err != nil {
		return nil, err
	}
	ws, resp, err := d.ws.DialContext(ctx, u.String(), h)
	if err != nil && resp != nil && resp.StatusCode == http.StatusUnauthorized && d.tokenFile != "" {
		// The token may have rotated since client-go last read the file.
		resp.Body.Close()
		b, rerr := os.ReadFile(d.tokenFile)
		if rerr != nil {
			return nil, fmt.Errorf("kube: open %s of VMI %s through the apiserver: 401, and the token file: %w", sub, ref, rerr)
		}
		if h, err = d.headers(ctx, u.String(), strings.TrimSpace(string(b))); err != nil {
			return nil, err
		}
		ws, resp, err = d.ws.DialContext(ctx, u.String(), h)
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("kube: open %s of VMI %s through the apiserver: %s%s: %w", sub, ref, resp.Status, statusMessage(resp), err)
		}
		return nil, fmt.Errorf("kube: open %s of VMI %s through the apiserver: %w", sub, ref, err)
	}
	// A KubeVirt stream is no Resizer: a text frame would break it.
	o := relay.WSConnOptions{DropIsEOF: true}
	if sub == "console" {
		o.CloseWait = serialCloseWait
	}
	return relay.NewWSConn(ws, o), nil
}

// statusMessage returns ": <message>" from a refused upgrade's
// metav1.Status body, or "" when it has none.
func statusMessage(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var st metav1.Status
	if json.Unmarshal(b, &st) != nil || st.Message == "" {
		return ""
	}
	return ": " + st.Message
}
