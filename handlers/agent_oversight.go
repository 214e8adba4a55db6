package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handleAgentOversight serves POST
// /api/vdi/desktops/{ns}/{member}/oversight/{action}: the holder (or an
// admin), signed in as a person, takes control from the agent at work in
// the desktop (take), hands it back (hand-back), stops it (stop) or lets
// it go on (go-on). The state is kept on the claim, so the agent's calls
// on every replica obey it; calls in flight on this replica that it bars
// end at once, those on others when their claim cache sees the change.
// Every page of the desktop shows the change through its viewers' long
// poll. It answers the desktop as it is after.
func (h *mcpRoute) handleAgentOversight(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.desktops.OverseeAgent(r.Context(), id, ref(r), r.PathValue("action"))
	if err != nil {
		return err
	}
	h.seat.Oversaw(d)
	h.watchers.touch(ref(r)) // this replica's pages of the desktop; others', through the claim
	h.log.Info("agent oversight", "desktop", ref(r), "by", id.Login, "action", r.PathValue("action"), "agent", d.Agent)
	writeJSON(w, http.StatusOK, d)
	return nil
}
