package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// linkInfo answers GET …/link.
type linkInfo struct {
	// Path is how the portal reaches the desktop's console: direct, peer
	// or apiserver; empty while no console is open.
	Path string `json:"path"`
}

// handleDesktopLink serves GET /api/vdi/desktops/{ns}/{member}/link: the
// path of the desktop's open console. The console page times this small
// request for its round-trip figure.
func (h *userDesktops) handleDesktopLink(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	if _, err := h.desktops.Desktop(r.Context(), id, ref); err != nil { // holder or admin only
		return err
	}
	writeJSON(w, http.StatusOK, linkInfo{Path: h.console.sessions.Path(ref)})
	return nil
}
