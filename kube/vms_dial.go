package kube

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// SubprotocolKubeVirt is the websocket subprotocol of KubeVirt's console
// streams: raw bytes in binary messages.
const SubprotocolKubeVirt = "plain.kubevirt.io"

// dialer opens KubeVirt console websockets through the apiserver with the
// rest.Config's TLS and credentials (client certificates or a bearer token;
// exec plugins and impersonation are not carried over).
type dialer struct {
	base  *url.URL
	ws    websocket.Dialer
	token string
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
	return &dialer{base: base, token: cfg.BearerToken,
		ws: websocket.Dialer{TLSClientConfig: tlsCfg, Subprotocols: []string{SubprotocolKubeVirt}, Proxy: http.ProxyFromEnvironment}}, nil
}

// Dial opens a running member's console through the apiserver: VNC, or the
// serial console; other protocols are not KubeVirt subresources.
func (v *VMs) Dial(ctx context.Context, ref vdi.Ref, p vdi.Protocol) (net.Conn, error) {
	var sub string
	switch p {
	case vdi.ProtocolVNC:
		sub = "vnc"
	case vdi.ProtocolSerial:
		sub = "console"
	default:
		return nil, fmt.Errorf("kube: %s has no %s console through the apiserver", ref, p)
	}
	u := *v.dial.base
	u.Path = strings.TrimSuffix(u.Path, "/") + "/apis/subresources.kubevirt.io/v1/namespaces/" + url.PathEscape(ref.Namespace) +
		"/virtualmachineinstances/" + url.PathEscape(ref.Name) + "/" + sub
	h := http.Header{}
	if v.dial.token != "" {
		h.Set("Authorization", "Bearer "+v.dial.token)
	}
	ws, resp, err := v.dial.ws.DialContext(ctx, u.String(), h)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("kube: open %s console of %s: %s: %w", sub, ref, resp.Status, err)
		}
		return nil, fmt.Errorf("kube: open %s console of %s: %w", sub, ref, err)
	}
	return &wsConn{ws: ws}, nil
}
