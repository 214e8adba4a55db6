package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handleAgentOversight serves POST
// /api/vdi/desktops/{ns}/{member}/oversight/{action}: the holder (or an
// admin), signed in as a person, takes control from the agent at work in
// the desktop (take), hands it back (hand-back), stops it (stop) or lets
// it go on (go-on); a stop may also revoke the agent's token (the body
// api.Oversight: the token the claim names, as the one who stops it). The
// state is kept on the claim, so the agent's calls on every replica obey
// it; calls in flight on this replica that it bars end at once, those on
// others when their claim cache sees the change. Every page of the
// desktop shows the change through its viewers' long poll. It answers the
// desktop as it is after.
func (h *mcpRoute) handleAgentOversight(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.Oversight
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	action := r.PathValue("action")
	if req.RevokeToken && action != vdi.OversightStop {
		return vdi.Errorf(vdi.EInvalid, "Send revokeToken with stop only.", "Only a stop revokes the agent's token, not %s.", action)
	}
	d, err := h.desktops.OverseeAgent(r.Context(), id, ref(r), action)
	if err != nil {
		return err
	}
	h.seat.Oversaw(d)
	h.console.sessions.Watchers().Touch(ref(r)) // this replica's pages of the desktop; others', through the claim
	h.log.Info("agent oversight", "desktop", ref(r), "by", id.Login, "action", action, "agent", d.Agent)
	if req.RevokeToken {
		if err := h.revokeAgentToken(r, id, d); err != nil {
			return err
		}
		h.console.sessions.Watchers().Touch(ref(r)) // the pages offer it no going on
		if d, err = h.desktops.Desktop(r.Context(), id, ref(r)); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, d)
	return nil
}

// revokeAgentToken revokes the token of the agent at work in d, as id
// (its owner, the holder, or an admin: package tokens checks), audited
// there as any revoke is, and notes it on the claim.
func (h *mcpRoute) revokeAgentToken(r *http.Request, id vdi.Identity, d vdi.Desktop) error {
	if h.tokens == nil {
		return noTokens
	}
	if d.AgentToken == "" {
		return vdi.Errorf(vdi.EConflict, "Revoke it on the Tokens page.", "The agent was stopped, but the claim of %s/%s names no token to revoke.", d.Namespace, d.Name)
	}
	if err := h.tokens.Revoke(r.Context(), id, d.AgentToken); err != nil {
		return err
	}
	h.log.Info("agent token revoked at stop", "desktop", ref(r), "by", id.Login, "agent", d.Agent)
	// Every page of the desktop then offers no "go on" to an agent that
	// cannot.
	if err := h.desktops.NoteAgentRevoked(r.Context(), ref(r), d.AgentToken); err != nil {
		h.log.Warn("agent's revoked token not noted on the claim", "desktop", ref(r), "err", err)
	}
	return nil
}
