package handlers

import (
	"context"
	"net"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/agent"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// mcpRoute serves /mcp, the agent seat (package agent).
type mcpRoute struct {
	*renderer
	auth     Identifier
	desktops Desktops
	seat     *agent.Seat
	console  *consoleState // its sessions' watchers are woken when an agent's oversight changes
	tokens   Tokens        // for Stop's "revoke the token too"; nil: none kept
}

// newMCPRoute returns the agent seat's route: its screens are the
// desktops' shared hubs, joined as control clients like a person's
// console, by the same paths (direct, a peer, the API server), and held
// as consoles of the desktop (console.Sessions.HoldAgent).
func newMCPRoute(rd *renderer, cfg Config, cs *consoleState) *mcpRoute {
	join := func(ctx context.Context, id vdi.Identity, ref vdi.Ref) (net.Conn, error) {
		conn, _, err := cs.screens.Join(ctx, ref, true, cs.screenDial(ref))
		if err != nil {
			return nil, err
		}
		return cs.sessions.HoldAgent(ctx, id, ref, conn), nil
	}
	var audit vdi.AuditLog
	if cfg.Audit != nil {
		audit = cfg.Audit
	}
	return &mcpRoute{renderer: rd, auth: cfg.Auth, desktops: cfg.Desktops, console: cs, tokens: cfg.Tokens, seat: agent.New(agent.Config{Desktops: cfg.Desktops, Join: join, Audit: audit, Log: rd.log, MaxDesktops: cfg.MaxAgentDesktops, SeatIdle: cfg.AgentSeatIdle})}
}

// handleMCP serves /mcp (Streamable HTTP): only a personal access token
// opens it, never a cookie, so that no page of another site can drive an
// agent seat with a signed-in browser. Each token's calls have rate
// limits of their own (package agent) in place of the per-user one.
func (h *mcpRoute) handleMCP(w http.ResponseWriter, r *http.Request) {
	if id, ok := h.tokenOnly(w, r, "The agent seat"); ok {
		h.seat.Serve(w, r, id)
	}
}

// tokenOnly identifies r's sender by a personal access token only, never
// a cookie or an identity proxy's header; without one it answers 401 (what
// names the route) and reports false.
func (h *mcpRoute) tokenOnly(w http.ResponseWriter, r *http.Request, what string) (vdi.Identity, bool) {
	id, ok := h.auth.Identify(r)
	if !ok || id.Token == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="corral-vdi-portal"`)
		h.writeAPIError(w, r, vdi.Errorf(vdi.EUnauthorized, "Make a token on the portal's Tokens page and send it as Authorization: Bearer <token>.",
			"%s needs a personal access token.", what))
		return vdi.Identity{}, false
	}
	return id, true
}
