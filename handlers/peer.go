package handlers

import (
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
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
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, proto, ref.Namespace, ref.Name); err != nil {
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
	h.pipe(w, r, conn, relay.Options{Control: relay.TerminalControl(conn)}, "peer link", "desktop", ref, "protocol", p)
}

// pipe upgrades a peer link's request and relays it to conn until either
// ends, logging what as it opens and closes with attrs.
func (h *peerSocket) pipe(w http.ResponseWriter, r *http.Request, conn net.Conn, opts relay.Options, what string, attrs ...any) {
	ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
	if err != nil {
		conn.Close()
		return
	}
	begin := time.Now()
	attrs = append([]any{"remote", r.RemoteAddr}, attrs...)
	h.log.Info(what+" opened", attrs...)
	opts.MaxMessage, opts.PingEvery = relay.DefaultMaxMessage, h.console.cfg.PingEvery
	stats, err := relay.Pipe(r.Context(), ws, conn, opts)
	h.log.Info(what+" closed", append(attrs, "bytesIn", stats.BytesIn, "bytesOut", stats.BytesOut,
		"elapsed", time.Since(begin).Round(time.Millisecond), "err", err)...)
}

// handlePeerScreen serves GET /peer/v1/screen/{role}/{ns}/{member}: another
// replica relays a client of a desktop whose screen this replica owns to
// its hub (console.Screens). The signature covers the role, the desktop
// and this replica (relay.ScreenLink), once: the role is what the other
// replica authorized, and a view link never carries input to the desktop.
// A replica that does not own the screen refuses with 409 and dials
// nothing.
func (h *peerSocket) handlePeerScreen(w http.ResponseWriter, r *http.Request) {
	role, ref := r.PathValue("role"), ref(r)
	nonce, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, relay.ScreenLink(role), ref.Namespace, ref.Name)
	if err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	if role != relay.ScreenControl && role != relay.ScreenView {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Use control or view.", "No screen link role %q.", role))
		return
	}
	conn, err := h.console.screens.ServeLink(r.Context(), ref, role == relay.ScreenControl, nonce, h.console.screenDial(ref))
	if errors.Is(err, console.ErrNotOwner) {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EConflict, "Read the screen's owner record again.", "This replica does not own the screen of %s.", ref))
		return
	} else if err != nil {
		h.log.Warn("screen link not served", "remote", r.RemoteAddr, "desktop", ref, "err", err)
		h.writeAPIError(w, r, err)
		return
	}
	h.pipe(w, r, conn, relay.Options{}, "screen link", "desktop", ref, "role", role)
}

// handlePeerVideo serves GET /peer/v1/video/{nonce}/{ns}/{member}: the
// replica that relays a viewer to this replica's hub over the screen link
// whose signature's nonce is nonce takes the viewer's H.264 video for its
// own WebRTC peer (console.Screens.ServeVideo). The signature covers the
// nonce, the desktop and this replica, once; the screen link must be of
// that desktop: a video link carries no screen its signer did not name.
// Anything else is refused with 409, before the upgrade.
func (h *peerSocket) handlePeerVideo(w http.ResponseWriter, r *http.Request) {
	nonce, ref := r.PathValue("nonce"), ref(r)
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, relay.VideoLink(nonce), ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	answered := false // by the upgrade, or its refusal
	err := h.console.screens.ServeVideo(r.Context(), ref, nonce, func() (*relay.VideoConn, error) {
		answered = true
		ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
		if err != nil {
			return nil, err
		}
		h.log.Info("video link opened", "remote", r.RemoteAddr, "desktop", ref)
		return relay.NewVideoConn(ws), nil
	})
	switch {
	case answered:
		h.log.Info("video link closed", "remote", r.RemoteAddr, "desktop", ref, "err", err)
	case errors.Is(err, console.ErrNoScreenLink):
		h.log.Warn("video link refused: no such screen link", "remote", r.RemoteAddr, "desktop", ref)
		h.writeAPIError(w, r, vdi.Errorf(vdi.EConflict, "Open the screen link again, then its video link.",
			"This replica serves no screen link of %s by that nonce.", ref))
	case err != nil:
		h.writeAPIError(w, r, vdi.Errorf(vdi.EConflict, "Open the screen link again, then its video link.",
			"The screen link's viewer of %s has no video now.", ref))
	}
}

// handlePeerStream serves GET /peer/v1/stream/{protocol}/{role}/{ns}/{member}:
// another replica relays an invitee to the holder's terminal or serial
// console this replica shares (console.Streams), signed for the protocol,
// the role, the desktop and this replica. A replica that shares none
// refuses with 409.
func (h *peerSocket) handlePeerStream(w http.ResponseWriter, r *http.Request) {
	proto, role, ref := r.PathValue("protocol"), r.PathValue("role"), ref(r)
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, relay.StreamLink(proto, role), ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	p := vdi.Protocol(proto)
	if (p != vdi.ProtocolTerminal && p != vdi.ProtocolSerial) || (role != relay.ScreenControl && role != relay.ScreenView) {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Use terminal or serial, control or view.", "No stream link for %s in role %q.", proto, role))
		return
	}
	conn, err := h.console.shared.ServeLink(ref, p, role == relay.ScreenControl)
	if err != nil {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EConflict, "Read the owner record again.", "This replica shares no %s console of %s.", p, ref))
		return
	}
	h.pipe(w, r, conn, relay.Options{}, "stream link", "desktop", ref, "protocol", p, "role", role)
}

// handlePeerHeld serves GET /peer/v1/held/{protocol}/{version}/{ns}/{member}:
// whether this replica holds its serial console or terminal of a desktop
// under the record version, or is writing a record of it
// (console.Streams.Holds), for another replica that found the record
// naming this one and would take it over, or join it (relay.PeerHolds); signed for the protocol, the version,
// the desktop and this replica, once. It changes nothing.
func (h *peerSocket) handlePeerHeld(w http.ResponseWriter, r *http.Request) {
	proto, version, ref := r.PathValue("protocol"), r.PathValue("version"), ref(r)
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, relay.HeldKind(proto, version), ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	p := vdi.Protocol(proto)
	if p != vdi.ProtocolSerial && p != vdi.ProtocolTerminal {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Ask about serial or terminal.", "No record of a %s console to ask about.", proto))
		return
	}
	writeJSON(w, http.StatusOK, relay.Held{Held: h.console.shared.Holds(ref, p, version)})
}

// refusePeer answers a peer link whose signature err refused.
func (h *peerSocket) refusePeer(w http.ResponseWriter, r *http.Request, ref vdi.Ref, err error) {
	if _, user := h.identify(r); user {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EForbidden, "Open the desktop's console from its page.", "Peer links are for peer portals, not users."))
		return
	}
	h.log.Warn("peer link refused", "remote", r.RemoteAddr, "desktop", ref, "path", r.URL.Path, "err", err)
	h.writeAPIError(w, r, vdi.Errorf(vdi.EUnauthorized,
		"Both portals need the same CORRAL_VDI_PEER_SECRET and clocks within 30s; each signature is good once, for the peer URL it was made for.",
		"Peer signature missing or not valid."))
}

// identify is h.auth's identity of r; none without an Identifier (a
// process that serves forwarded claims alone, PeerTakes).
func (h *peerSocket) identify(r *http.Request) (vdi.Identity, bool) {
	if h.auth == nil {
		return vdi.Identity{}, false
	}
	return h.auth.Identify(r)
}
