package handlers

import (
	"context"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handleVNCSocket serves GET /ws/vnc/{ns}/{member}: the VNC console
// websocket. The caller must hold the desktop (or be an admin); that and the
// desktop's stream are checked before the upgrade, so a refusal is a plain
// HTTP error. The target is the member's own, never the client's choice.
func (h *Handler) handleVNCSocket(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	return h.serveConsole(w, r, id, vdi.ProtocolVNC)
}

func (h *Handler) serveConsole(w http.ResponseWriter, r *http.Request, id vdi.Identity, p vdi.Protocol) error {
	ref := ref(r)
	if err := h.desktops.Authorize(r.Context(), id, ref); err != nil {
		return err
	}
	conn, err := h.desktops.Dial(r.Context(), ref, p)
	if err != nil {
		return err
	}
	ws, err := relay.Upgrader(nil).Upgrade(w, r, nil)
	if err != nil {
		conn.Close() // the upgrader has already answered the client
		return nil
	}
	h.runSession(r.Context(), id, ref, p, "direct", func(ctx context.Context, opts relay.Options) (relay.Stats, error) {
		return relay.Pipe(ctx, ws, conn, opts)
	})
	return nil
}
