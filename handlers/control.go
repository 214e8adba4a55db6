package handlers

import (
	"net/http"
	"slices"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Request control: an admin watching a desktop (view only) asks its holder
// for control, to help. The request waits, like a watch under the pool's
// consent policy, for the holder's Allow or Refuse on their console page
// (the same answer route, forwarded to the replica where it waits); on
// Allow the admin gets a grant, a short-lived token signed with the
// replicas' shared keys, that opens their screen console with control on
// any replica. The grant names the holder, so it dies with their claim.

// controlWait is how long a request for control waits for the holder: less
// than a proxy's usual 60 s idle timeout, as the request is a plain POST.
const controlWait = 45 * time.Second

// wantsControl is what a request for control asks for (api.Viewer.Wants),
// as the holder's page shows it.
const wantsControl = "request-control"

// handleControlRequest serves POST /api/vdi/desktops/{ns}/{member}/control:
// an admin watching the desktop asks its holder for control and waits (up
// to controlWait) for the answer: 200 {grant, holder} when allowed, 409
// when refused or unanswered. Only an admin who is watching may ask; only
// the holder answers (handleViewerAnswer). Audited either way.
func (h *Handler) handleControlRequest(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	d, err := h.desktops.Desktop(r.Context(), id, ref)
	if err != nil {
		return err
	}
	switch {
	case !id.Admin:
		return vdi.Errorf(vdi.EForbidden, "Ask the holder to invite you with control (Share).", "Only an admin asks for control of %s.", ref)
	case d.Holder == "":
		return vdi.Errorf(vdi.EConflict, "Nobody is on it: open its console instead.", "Nobody holds %s.", ref)
	case d.Holder == id.Login:
		return vdi.Errorf(vdi.EConflict, "Open its console.", "You hold %s: it is yours to control.", ref)
	case d.Console.Watch == vdi.WatchOff:
		return vdi.Errorf(vdi.EForbidden, "Change the pool's watch policy first.", "The pool's policy keeps watchers off %s.", ref)
	}
	list, _, _ := h.everyViewer(r.Context(), ref)
	if !slices.ContainsFunc(list, func(v api.Viewer) bool { return v.User == id.Login && v.Role == "watch" }) {
		return vdi.Errorf(vdi.EForbidden, "Watch the desktop first, then ask for control.", "You are not watching %s.", ref)
	}
	ask := api.Viewer{User: id.Login, Role: wantsControl, Protocol: vdi.ProtocolVNC, Since: time.Now()}
	allowed := h.console.sessions.Watchers().AwaitFor(r.Context(), ref, ask, controlWait)
	outcome := "granted by " + d.Holder
	if !allowed {
		outcome = "refused or unanswered by " + d.Holder
	}
	h.trail.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "control-request", Namespace: ref.Namespace, Target: ref.Name, Detail: outcome})
	if !allowed {
		return vdi.Errorf(vdi.EConflict, "Ask again, or reach them another way.", "%s did not allow you control.", d.Holder)
	}
	writeJSON(w, http.StatusOK, api.ControlGrant{Grant: h.console.tokens.MintFor(console.ControlPurpose(d.Holder), id.Login, ref), Holder: d.Holder})
	return nil
}

// controlGranted reports whether the console request r carries a grant of
// control (?control=) of d for id that the holder gave (handleControlRequest).
func (h *Handler) controlGranted(r *http.Request, id vdi.Identity, d vdi.Desktop) (bool, error) {
	grant := r.URL.Query().Get("control")
	if grant == "" {
		return false, nil
	}
	if err := h.console.tokens.CheckFor(console.ControlPurpose(d.Holder), grant, id.Login, d.Ref()); err != nil {
		return false, vdi.Errorf(vdi.EForbidden, "Ask the holder for control again.", "This grant of control of %s is not good: %v.", d.Ref(), err)
	}
	return true, nil
}

// answerEnd is the holder's answer that takes back the control they gave
// (POST …/viewers/{id}/end).
const answerEnd = "end"

// takeBackControl ends the admin's console id of ref with the control the
// holder gave, on whichever replica it runs; the admin's page reopens
// watching, view only. Audited.
func (h *Handler) takeBackControl(w http.ResponseWriter, r *http.Request, id vdi.Identity, ref vdi.Ref) error {
	viewer := r.PathValue("id")
	if !h.console.sessions.Watchers().End(ref, viewer) && !h.console.answerOnPeers(r.Context(), ref, viewer, answerEnd) {
		return vdi.Errorf(vdi.ENotFound, "It may have closed already; nothing to do.", "Nobody you gave control of %s is on it.", ref)
	}
	h.trail.audit(r.Context(), vdi.AuditEvent{Actor: id.Login, Action: "control-taken-back", Namespace: ref.Namespace, Target: ref.Name})
	w.WriteHeader(http.StatusNoContent)
	return nil
}
