package handlers

import (
	"errors"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handlePeerScreen serves GET /peer/v1/screen/{role}/{ns}/{member}: another
// replica relays a client of a desktop whose screen this replica owns to
// its hub (console.Screens). The signature covers the role, the desktop
// and this replica (relay.ScreenLink), once: the role is what the other
// replica authorized, and a view link never carries input to the desktop.
// A replica that does not own the screen refuses with 409 and dials
// nothing.
func (h *peerSocket) handlePeerScreen(w http.ResponseWriter, r *http.Request) {
	role, ref := r.PathValue("role"), ref(r)
	if err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, relay.ScreenLink(role), ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	if role != relay.ScreenControl && role != relay.ScreenView {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Use control or view.", "No screen link role %q.", role))
		return
	}
	conn, err := h.console.screens.ServeLink(r.Context(), ref, role == relay.ScreenControl, h.console.screenDial(ref))
	if errors.Is(err, console.ErrNotOwner) {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EConflict, "Read the screen's owner record again.", "This replica does not own the screen of %s.", ref))
		return
	} else if err != nil {
		h.log.Warn("screen link not served", "remote", r.RemoteAddr, "desktop", ref, "err", err)
		h.writeAPIError(w, r, err)
		return
	}
	ws, err := relay.Upgrader(h.checkOrigin).Upgrade(w, r, nil)
	if err != nil {
		conn.Close()
		return
	}
	begin := time.Now()
	h.log.Info("screen link opened", "remote", r.RemoteAddr, "desktop", ref, "role", role)
	stats, err := relay.Pipe(r.Context(), ws, conn, relay.Options{MaxMessage: relay.DefaultMaxMessage, PingEvery: h.console.cfg.PingEvery})
	h.log.Info("screen link closed", "remote", r.RemoteAddr, "desktop", ref, "role", role, "bytesIn", stats.BytesIn, "bytesOut", stats.BytesOut,
		"elapsed", time.Since(begin).Round(time.Millisecond), "err", err)
}
