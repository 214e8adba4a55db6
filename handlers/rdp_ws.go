package handlers

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// rdpDialTimeout bounds connecting to a desktop's RDP server.
const rdpDialTimeout = 5 * time.Second

// handleRDPSocket serves GET /ws/rdp/{ns}/{member}: the RDCleanPath gateway
// IronRDP connects through. The caller must hold the desktop (or be an
// admin), checked before the upgrade like every console. After it, the
// request's proxy_auth must be a token /connect minted for this caller and
// desktop; the server is the desktop's own, never the request's
// destination. Refusals after the upgrade are RDCleanPath error PDUs, which
// IronRDP shows as such. The relayed session is recorded like any console.
func (h *Handler) handleRDPSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	d, err := h.desktops.Desktop(r.Context(), id, ref) // holder or admin only
	if err != nil {
		return err
	}
	if d.Recorded {
		return vdi.Errorf(vdi.EForbidden, "Use its VNC console, which is recorded.", "Desktop %s/%s is in a recorded pool, and the portal cannot record RDP.", d.Namespace, d.Name)
	}
	if !h.checkOrigin(r) {
		return vdi.Errorf(vdi.EForbidden, "Open the console from the portal's own pages.", "Console websockets only accept the portal's own origin, not %q.", r.Header.Get("Origin"))
	}
	// Someone other than the holder on RDP has control, not a view (RDP
	// cannot share one): the pool's watch policy decides, and the holder's
	// console says so. With consent, the holder answers once the gateway
	// has the caller's RDCleanPath request (its token checked), before the
	// desktop is dialled.
	watching := d.Holder != "" && d.Holder != id.Login
	if watching && d.Console.Watch == vdi.WatchOff {
		return vdi.Errorf(vdi.EForbidden, "Ask the holder to share their screen another way, or change the pool's watch policy.",
			"The pool's policy keeps watchers off %s: only its holder opens its consoles.", ref)
	}
	watcher := api.Viewer{User: id.Login, Role: "control", Protocol: vdi.ProtocolRDP, Since: time.Now()}
	asks := watching && d.Console.Watch == vdi.WatchConsent
	release, err := h.consoles.acquire(id.Login)
	if err != nil {
		return err
	}
	defer release()
	ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
	if err != nil {
		return nil // the upgrader has already answered the client
	}
	begin := time.Now()
	req, err := h.rdpRequest(ws, id, ref)
	if err == nil && asks {
		err = h.rdpConsent(r.Context(), ws, ref, d.Holder, watcher)
	}
	var stream *relay.RDPStream
	var path string
	if err == nil {
		stream, path, err = h.rdpConnect(r.Context(), ws, req, ref)
	}
	if err != nil {
		h.log.Warn("rdp connection refused", "desktop", ref, "user", id.Login, "err", err)
		relay.RejectRDCleanPath(ws, err)
		return nil
	}
	h.log.Debug("rdp handshake done", "desktop", ref, "user", id.Login, "elapsed", time.Since(begin).Round(time.Millisecond))
	ses := console.Session{ID: console.NewID(), User: id, Ref: ref, Protocol: vdi.ProtocolRDP, Path: path, Holder: d.Holder}
	if watching { // the holder's page says so at once
		ses.Watcher = &watcher
	}
	h.console.sessions.Run(r.Context(), ses, func(ctx context.Context, opts relay.Options) (relay.Stats, error) {
		return relay.PipeRDP(ctx, ws, stream, opts)
	})
	return nil
}

// rdpRequest reads the client's RDCleanPath request and checks its token
// and destination. Errors are *relay.RDPError where the client should
// learn why.
func (h *Handler) rdpRequest(ws *websocket.Conn, id vdi.Identity, ref vdi.Ref) (*relay.RDCleanPathPDU, error) {
	req, err := relay.ReadRDCleanPathRequest(ws)
	if err != nil {
		return nil, err
	}
	switch err := h.console.tokens.Check(req.ProxyAuth, id.Login, ref); {
	case errors.Is(err, console.ErrRDPTokenExpired):
		return nil, relay.RDPHTTPError(http.StatusUnauthorized, "RDP token expired", nil)
	case errors.Is(err, console.ErrRDPTokenForeignKey):
		return nil, relay.RDPHTTPError(http.StatusForbidden, "RDP token signed by a portal with other token keys", nil)
	case err != nil:
		return nil, relay.RDPHTTPError(http.StatusForbidden, "RDP token not valid for this user and desktop", nil)
	}
	// The destination is only checked, never used: the page sends what
	// /connect told it, so anything else is a crafted request.
	if req.Destination != rdpDestination(ref) {
		return nil, relay.RDPHTTPError(http.StatusBadRequest, "RDCleanPath destination does not name this desktop", nil)
	}
	return req, nil
}

// rdpConsent lists w as asking to open ref's RDP console and waits for
// the holder's answer, pinging the caller meanwhile (IronRDP waits for the
// RDCleanPath answer, so nothing reaches the desktop until then). A
// refusal, no answer in time or a caller gone is HTTP 409 in-band, which
// the page tells from a bad token's 403.
func (h *Handler) rdpConsent(ctx context.Context, ws *websocket.Conn, ref vdi.Ref, holder string, w api.Viewer) error {
	alive, stop := wsAlive(ctx, ws)
	allowed := h.console.sessions.Watchers().Await(alive, ref, w)
	stop()
	if !allowed {
		return relay.RDPHTTPError(http.StatusConflict, holder+" did not allow the watch", nil)
	}
	return nil
}

// rdpConnect connects to the desktop's RDP server by the first relay path
// that works, forwards the client's request and answers the client; it
// returns the path's name.
func (h *Handler) rdpConnect(ctx context.Context, ws *websocket.Conn, req *relay.RDCleanPathPDU, ref vdi.Ref) (*relay.RDPStream, string, error) {
	dctx, cancel := context.WithTimeout(ctx, rdpDialTimeout)
	conn, path, err := h.console.dial.Dial(dctx, ref, vdi.ProtocolRDP)
	cancel()
	if err != nil {
		return nil, "", relay.RDPDialError(err)
	}
	stream, resp, err := relay.RDPConnect(ctx, conn, req, rdpServerAddr(conn))
	if err != nil {
		return nil, "", err
	}
	if err := relay.AcceptRDCleanPath(ws, resp); err != nil {
		stream.Close()
		return nil, "", err
	}
	return stream, path, nil
}

// rdpDestination is the destination the page gives IronRDP for ref. IronRDP
// wants host:port; the gateway only compares it.
func rdpDestination(ref vdi.Ref) string {
	return ref.Name + "." + ref.Namespace + ":3389"
}

// rdpServerAddr is the server address told to the client, which IronRDP
// parses as IP:port. A local desktop's server listens on a Unix socket, on
// this host: it is given as loopback.
func rdpServerAddr(conn net.Conn) string {
	if a, ok := conn.RemoteAddr().(*net.TCPAddr); ok {
		return a.String()
	}
	return "127.0.0.1:3389"
}
