package handlers

import (
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handlePeerSocket serves GET /peer/v1/{protocol}/{ns}/{member}: a peer
// portal's link to a desktop it cannot reach. The request must carry a
// signature with the shared peer secret for exactly this console at this
// portal, never seen before (see relay.SignPeer); the peer portal has authorized its user. The desktop is
// resolved and dialed by this portal's own backend, directly and never
// through further peers, so a peer is no open proxy and links cannot loop.
// The session is recorded by the portal the user is connected to.
func (h *peerSocket) handlePeerSocket(w http.ResponseWriter, r *http.Request) {
	proto, ref := r.PathValue("protocol"), ref(r)
	if err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, proto, ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	p := vdi.Protocol(proto)
	switch p {
	case vdi.ProtocolVNC, vdi.ProtocolSerial, vdi.ProtocolTerminal:
	default:
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Use vnc, serial or terminal.", "No peer link for protocol %s.", proto))
		return
	}
	conn, err := h.desktops.Dial(r.Context(), ref, p)
	if err != nil {
		h.writeAPIError(w, r, err)
		return
	}
	ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
	if err != nil {
		conn.Close()
		return
	}
	begin := time.Now()
	h.log.Info("peer link opened", "remote", r.RemoteAddr, "desktop", ref, "protocol", p)
	stats, err := relay.Pipe(r.Context(), ws, conn, relay.Options{
		Control: relay.TerminalControl(conn), MaxMessage: relay.DefaultMaxMessage, PingEvery: h.console.cfg.PingEvery,
	})
	h.log.Info("peer link closed", "remote", r.RemoteAddr, "desktop", ref, "protocol", p, "bytesIn", stats.BytesIn, "bytesOut", stats.BytesOut,
		"elapsed", time.Since(begin).Round(time.Millisecond), "err", err)
}

// refusePeer answers a peer link whose signature err refused.
func (h *peerSocket) refusePeer(w http.ResponseWriter, r *http.Request, ref vdi.Ref, err error) {
	if _, user := h.auth.Identify(r); user {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EForbidden, "Open the desktop's console from its page.", "Peer links are for peer portals, not users."))
		return
	}
	h.log.Warn("peer link refused", "remote", r.RemoteAddr, "desktop", ref, "path", r.URL.Path, "err", err)
	h.writeAPIError(w, r, vdi.Errorf(vdi.EUnauthorized,
		"Both portals need the same CORRAL_VDI_PEER_SECRET and clocks within 30s; each signature is good once, for the peer URL it was made for.",
		"Peer signature missing or not valid."))
}
