package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// endSessions signs login out everywhere on behalf of admin id.
func (h *adminPages) endSessions(r *http.Request, id vdi.Identity, login string) error {
	if !auth.ValidLogin(login) {
		return vdi.Errorf(vdi.EInvalid, "Give the user name as they sign in.", "%q is not a user name.", login)
	}
	return h.auth.EndSessions(r.Context(), id, login)
}

// handleEndSessionsAPI serves POST /api/vdi/users/{login}/end-sessions
// (admins): every cookie session of the user ends, on every device. A
// user signed in by a proxy's identity headers is signed in again by
// the proxy: remove them there.
func (h *adminPages) handleEndSessionsAPI(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	login := r.PathValue("login")
	if err := h.endSessions(r, id, login); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]string{"ended": login})
	return nil
}

// handleEndSessionsForm serves POST /admin/end-sessions, the dashboard's
// "sign a user out everywhere" form.
func (h *adminPages) handleEndSessionsForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if err := h.endSessions(r, id, r.PostFormValue("login")); err != nil {
		return err
	}
	http.Redirect(w, r, "/admin", http.StatusSeeOther)
	return nil
}
