package handlers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/store"
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

// pipeFunc relays one console connection until it ends.
type pipeFunc func(ctx context.Context, opts relay.Options) (relay.Stats, error)

// runSession runs pipe as a session of id on ref: recorded in the session
// history, and renewing the claim while it is open. Every console
// protocol's websocket handler goes through here once it has upgraded.
func (h *Handler) runSession(ctx context.Context, id vdi.Identity, ref vdi.Ref, p vdi.Protocol, path string, pipe pipeFunc) {
	s := store.Session{ID: newID(), Login: id.Login, Namespace: ref.Namespace, Member: ref.Name, Protocol: string(p), Path: path}
	if err := h.sessions.OpenSession(ctx, s); err != nil {
		h.log.Error("record session", "err", err)
	}
	log := h.log.With("session", s.ID, "desktop", ref, "user", id.Login, "protocol", p, "path", path)
	log.Info("console opened")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go h.renewWhileOpen(ctx, id.Login, ref)
	stats, err := pipe(ctx, relay.Options{})
	reason := "closed"
	if err != nil {
		reason = err.Error()
	}
	if err := h.sessions.CloseSession(context.WithoutCancel(ctx), s.ID, stats.BytesIn, stats.BytesOut, reason); err != nil {
		h.log.Error("record session", "err", err)
	}
	log.Info("console closed", "bytesIn", stats.BytesIn, "bytesOut", stats.BytesOut, "reason", reason)
}

// renewWhileOpen keeps the holder's claim alive while a console is open.
func (h *Handler) renewWhileOpen(ctx context.Context, login string, ref vdi.Ref) {
	t := time.NewTicker(h.renewEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.desktops.Renew(ctx, login, ref); err != nil {
				h.log.Warn("renew claim", "desktop", ref, "user", login, "err", err)
			}
		}
	}
}

func newID() string {
	b := make([]byte, 12)
	rand.Read(b)
	return hex.EncodeToString(b)
}
