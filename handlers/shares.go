package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Sharing a desktop's console (vdi/share.go keeps the rules): the holder's
// API to invite, list and revoke, and the page an invited user opens. The
// invitee's console itself is the VNC websocket (console_ws.go), opened
// alongside the holder's.

// shareRoutes serves the invitations API and the invitee's page.
type shareRoutes struct {
	*renderer
	desktops Desktops
	console  *consoleState
}

// handleShareCreate serves POST /api/vdi/desktops/{ns}/{member}/shares:
// an invitation, or the update of the user's one (vdi.Service.Share).
func (h *shareRoutes) handleShareCreate(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.ShareRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	sh, err := h.desktops.Share(r.Context(), id, ref(r), vdi.ShareRequest{User: req.User, Control: req.Control, Expires: req.Expires})
	if err != nil {
		return err
	}
	if sh.RoleChanged { // invited again with the other role
		h.console.sessions.Invitees().End(sh.ID, console.RoleChanged(sh))
	}
	writeJSON(w, http.StatusCreated, shareOf(ref(r), sh))
	return nil
}

// handleSharesList serves GET /api/vdi/desktops/{ns}/{member}/shares.
func (h *shareRoutes) handleSharesList(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	list, err := h.desktops.Shares(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	out := make([]api.Share, 0, len(list))
	for _, sh := range list {
		out = append(out, shareOf(ref(r), sh))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// handleShareDelete serves DELETE /api/vdi/desktops/{ns}/{member}/shares/{id}:
// the invitation ends and its consoles close at once: on this replica
// here, on the others as their Lease watch sees the change (console.KeepShared).
func (h *shareRoutes) handleShareDelete(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	sh, err := h.desktops.Unshare(r.Context(), id, ref(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	h.console.sessions.Invitees().End(sh.ID, console.ShareEnded(id.Login+" stopped sharing this desktop."))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleShareControl serves PATCH /api/vdi/desktops/{ns}/{member}/shares/{id}
// {"control": bool}: the invitee's console reopens with the new role.
func (h *shareRoutes) handleShareControl(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	var req api.ShareControl
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	sh, err := h.desktops.SetShareControl(r.Context(), id, ref(r), r.PathValue("id"), req.Control)
	if err != nil {
		return err
	}
	h.console.sessions.Invitees().End(sh.ID, console.RoleChanged(sh))
	writeJSON(w, http.StatusOK, shareOf(ref(r), sh))
	return nil
}

// handleSharedPage serves GET /shared/{ns}/{member}: the invited user's
// console, view only unless the invitation gives control.
func (h *shareRoutes) handleSharedPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, sh, err := h.desktops.SharedDesktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	badge := "view only"
	if sh.Control {
		badge = "you can type and point"
	}
	h.render(w, r, http.StatusOK, views.Shadow(views.ShadowProps{
		Page:       h.pageProps(d.Holder+" shares "+d.Name, id),
		Heading:    d.Holder + " shares " + d.Namespace + "/" + d.Name + " with you",
		Badge:      badge,
		Back:       "/",
		BackText:   "Back to my desktops",
		ViewOnly:   !sh.Control,
		ConnectURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/connect",
		ViewersURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/viewers",
		Holder:     d.Holder,
		Me:         id.Login,
	}))
	return nil
}

// shareOf is sh as the API shows it, with the page the invitee opens.
func shareOf(ref vdi.Ref, sh vdi.Share) api.Share {
	return api.Share{ID: sh.ID, User: sh.User, Control: sh.Control, By: sh.By, Created: sh.Created, Expires: sh.Expires,
		URL: "/shared/" + ref.Namespace + "/" + ref.Name}
}
