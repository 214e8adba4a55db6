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
	// Someone other than the holder on RDP has control, not a view: only a
	// pool that lets admins in unasked allows it (consent is asked on the
	// consoles that can wait for it: VNC, serial, terminal), and the
	// holder's console says so.
	if watching := d.Holder != "" && d.Holder != id.Login; watching {
		if d.Console.Watch != vdi.WatchNotify {
			return vdi.Errorf(vdi.EForbidden, "Use the VNC console, where the holder can allow a watch, or change the pool's watch policy.",
				"The pool's watch policy (%s) keeps others off %s's RDP console.", d.Console.Watch, ref)
		}
		defer h.console.watchers.add(ref, api.Viewer{User: id.Login, Role: "control", Protocol: vdi.ProtocolRDP, Since: time.Now()})()
	}
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
	stream, path, err := h.rdpHandshake(r.Context(), ws, id, ref)
	if err != nil {
		h.log.Warn("rdp connection refused", "desktop", ref, "user", id.Login, "err", err)
		relay.RejectRDCleanPath(ws, err)
		return nil
	}
	h.log.Debug("rdp handshake done", "desktop", ref, "user", id.Login, "elapsed", time.Since(begin).Round(time.Millisecond))
	if d.Holder == id.Login {
		defer h.console.links.set(ref, path)()
	}
	h.runSession(r.Context(), newID(), id, ref, vdi.ProtocolRDP, path, func(ctx context.Context, opts relay.Options) (relay.Stats, error) {
		return relay.PipeRDP(ctx, ws, stream, opts)
	})
	return nil
}

// rdpHandshake reads the client's RDCleanPath request, checks its token,
// connects to the desktop's RDP server by the first relay path that works
// and answers the client; it returns the path's name. Errors are
// *relay.RDPError where the client should learn why.
func (h *Handler) rdpHandshake(ctx context.Context, ws *websocket.Conn, id vdi.Identity, ref vdi.Ref) (*relay.RDPStream, string, error) {
	req, err := relay.ReadRDCleanPathRequest(ws)
	if err != nil {
		return nil, "", err
	}
	switch err := h.console.tokens.Check(req.ProxyAuth, id.Login, ref); {
	case errors.Is(err, console.ErrRDPTokenExpired):
		return nil, "", relay.RDPHTTPError(http.StatusUnauthorized, "RDP token expired", nil)
	case errors.Is(err, console.ErrRDPTokenForeignKey):
		return nil, "", relay.RDPHTTPError(http.StatusForbidden, "RDP token signed by a portal with other token keys", nil)
	case err != nil:
		return nil, "", relay.RDPHTTPError(http.StatusForbidden, "RDP token not valid for this user and desktop", nil)
	}
	// The destination is only checked, never used: the page sends what
	// /connect told it, so anything else is a crafted request.
	if req.Destination != rdpDestination(ref) {
		return nil, "", relay.RDPHTTPError(http.StatusBadRequest, "RDCleanPath destination does not name this desktop", nil)
	}
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
