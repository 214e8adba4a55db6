package handlers

import (
	"net/http"
	"net/url"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// handleRecordingDelete serves DELETE /api/vdi/recordings/{id} (admins):
// the file and its metadata go, after the audit row is written.
func (h *recordingRoutes) handleRecordingDelete(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	recs, err := h.recordingsOf()
	if err != nil {
		return err
	}
	rid := r.PathValue("id")
	if err := recs.Delete(r.Context(), id, rid); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"deleted": rid})
	return nil
}

// handleRecordingDeleteForm serves POST /admin/recordings/{id}/delete, the
// recordings page's delete button once confirmed on the page.
func (h *recordingRoutes) handleRecordingDeleteForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	recs, err := h.recordingsOf()
	if err != nil {
		return err
	}
	rid := r.PathValue("id")
	if err := recs.Delete(r.Context(), id, rid); err != nil {
		return err
	}
	http.Redirect(w, r, "/admin/recordings?deleted="+url.QueryEscape(rid), http.StatusSeeOther)
	return nil
}
