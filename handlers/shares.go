package handlers

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
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
		h.console.invited.end(sh.ID, roleChanged(sh))
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
// here, on the others as their Lease watch sees the change (keepShared).
func (h *shareRoutes) handleShareDelete(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	sh, err := h.desktops.Unshare(r.Context(), id, ref(r), r.PathValue("id"))
	if err != nil {
		return err
	}
	h.console.invited.end(sh.ID, shareEnded(id.Login+" stopped sharing this desktop."))
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
	h.console.invited.end(sh.ID, roleChanged(sh))
	writeJSON(w, http.StatusOK, shareOf(ref(r), sh))
	return nil
}

// roleChangedPrefix starts the close reason of an invitee's console whose
// role changed; the invitee's page (admin-shadow.js) reopens on it.
const roleChangedPrefix = "Role changed: "

// roleChanged is the cause an invitee's console closes with when the
// holder hands control over or takes it back.
func roleChanged(sh vdi.Share) shareEnded {
	if sh.Control {
		return shareEnded(roleChangedPrefix + sh.By + " gave you control.")
	}
	return shareEnded(roleChangedPrefix + "you watch again, view only.")
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

// shareEnded is the cause an invitee's console closes with; its text is
// the close frame's reason, which the page shows.
type shareEnded string

func (e shareEnded) Error() string { return string(e) }

// invitees keeps the open consoles of each invitation, so that revoking it
// closes them at once. The zero value is ready.
type invitees struct {
	mu sync.Mutex
	by map[string]map[*context.CancelCauseFunc]struct{}
}

// add notes cancel as a console of invitation id until remove is called.
func (v *invitees) add(id string, cancel context.CancelCauseFunc) (remove func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.by == nil {
		v.by = map[string]map[*context.CancelCauseFunc]struct{}{}
	}
	if v.by[id] == nil {
		v.by[id] = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &cancel
	v.by[id][key] = struct{}{}
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		delete(v.by[id], key)
		if len(v.by[id]) == 0 {
			delete(v.by, id)
		}
	}
}

// end closes every console of invitation id with cause.
func (v *invitees) end(id string, cause error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for c := range v.by[id] {
		(*c)(cause)
	}
}

// shareChecker is what keepShared reads of the claim service.
type shareChecker interface {
	SharedDesktop(ctx context.Context, id vdi.Identity, ref vdi.Ref) (vdi.Desktop, vdi.Share, error)
	ClaimChanged(ref vdi.Ref) <-chan struct{}
}

// keepShared ends an invitee's console (cancel) once its invitation no
// longer holds: revoked or changed on another replica, the desktop
// released, run out, or the pool's rules changed. It checks at once when
// the claim changes on any replica (vdi.Service.ClaimChanged), and every
// `every` besides (the invitation running out, a store that reports no
// changes, a change missed while the watch reconnected). It returns when
// ctx ends.
func keepShared(ctx context.Context, desktops shareChecker, id vdi.Identity, ref vdi.Ref, sh vdi.Share, every time.Duration, cancel context.CancelCauseFunc) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		changed := desktops.ClaimChanged(ref) // before the check: a change during it wakes the wait
		_, cur, err := desktops.SharedDesktop(ctx, id, ref)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && cur.ID == sh.ID && cur.Control == sh.Control:
		case err == nil && cur.ID == sh.ID:
			cancel(roleChanged(cur)) // changed on another replica
			return
		case !time.Now().Before(sh.Expires):
			cancel(shareEnded("The invitation to this desktop ran out. Ask " + sh.By + " for a new one."))
			return
		case vdi.ErrorCode(err) == vdi.EUnavailable:
			// the claim cannot be read now; the relay goes on
		default:
			cancel(shareEnded("The invitation to this desktop ended: it was revoked, or the desktop was released."))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
		}
	}
}
