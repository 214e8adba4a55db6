package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handlePoolsList serves GET /api/vdi/pools.
func (h *userDesktops) handlePoolsList(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return err
	}
	if pools == nil {
		pools = []vdi.PoolStatus{}
	}
	writeJSON(w, http.StatusOK, pools)
	return nil
}

// handlePoolClaim serves POST /api/vdi/pools/{ns}/{pool}/claim: claim a
// free member (or get back the one already held) and power it on.
// The answer goes out before the claim lets its user's claim lock go
// (vdi.WithAnswerFirst).
func (h *userDesktops) handlePoolClaim(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ctx, answered := vdi.WithAnswerFirst(r.Context())
	defer answered()
	d, err := h.desktops.ClaimStarting(ctx, id, r.PathValue("ns"), r.PathValue("pool"))
	if err != nil {
		return err
	}
	h.console.dial.ProbeAhead(d)
	writeJSON(w, http.StatusOK, d)
	sendNow(w)
	return nil
}
