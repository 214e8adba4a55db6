package handlers

import (
	"net/http"
	"slices"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// watchWait bounds one long poll of GET …/viewers: the page asks again
// after it, so a proxy's idle timeout (often 60 s) never cuts one. Each
// round trip is about 1.4 KB of headers, an idle console page's only
// bytes beside its websockets' keepalives: at 25 s it was 3.4 KiB/min of
// the 4 KiB/min an idle console may move, and a 20 s window holding one
// measured 4.2 (TestConsole_SerialLogin).
const watchWait = 50 * time.Second

// handleDesktopViewers serves GET /api/vdi/desktops/{ns}/{member}/viewers:
// who other than the holder has a console of the desktop open, on any
// replica, for the holder, an admin, or a user invited to it (who is not
// shown the watches waiting for the holder's consent). It is a long
// poll: with If-None-Match naming the list the page has (its ETag, the
// same from every replica), it waits (up to watchWait) for a change
// before it answers; 304 when none came.
func (h *Handler) handleDesktopViewers(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	look := func() (vdi.Desktop, bool, error) {
		d, err := h.desktops.Desktop(r.Context(), id, ref)
		if vdi.ErrorCode(err) == vdi.EForbidden {
			d, _, err = h.desktops.SharedDesktop(r.Context(), id, ref)
			return d, true, err
		}
		return d, false, err
	}
	if _, _, err := look(); err != nil {
		return err
	}
	had := r.Header.Get("If-None-Match")
	deadline := time.Now().Add(watchWait)
	for {
		claim := h.desktops.ClaimChanged(ref) // before the claim is read: no change is missed
		d, invitee, err := look()
		if err != nil {
			return err
		}
		list, peers, changed := h.everyViewer(r.Context(), ref)
		if invitee {
			list = slices.DeleteFunc(list, func(v api.Viewer) bool { return v.Role == console.RoleAsks })
		}
		list = withAgentState(list, d)
		if d.Agent == "" {
			claim = nil // no agent's oversight to show: its claim's heartbeats wake no one
		}
		if list == nil {
			list = []api.Viewer{}
		}
		tag := listTag(list)
		w.Header().Set("ETag", tag)
		if tag != had {
			writeJSON(w, http.StatusOK, list)
			return nil
		}
		if !h.awaitViewers(r.Context(), ref, changed, claim, peers, time.Until(deadline)) {
			if r.Context().Err() == nil {
				w.WriteHeader(http.StatusNotModified)
			}
			return nil
		}
	}
}

// withAgentState gives the agent entries of list the oversight of d's
// claim (who took control, who stopped it), so that every page of the
// desktop shows a take or stop made anywhere. An agent its holder took
// control from or stopped is listed with that state even when its
// screen is closed (a stop closes it): its page still offers Hand back
// or Let the agent go on.
func withAgentState(list []api.Viewer, d vdi.Desktop) []api.Viewer {
	if d.Agent == "" {
		return list
	}
	found := false
	for i := range list {
		if list[i].Role == console.RoleAgent {
			list[i].AgentControl, list[i].AgentStopped, list[i].AgentRevoked = d.AgentControl, d.AgentStopped, d.AgentRevoked
			found = true
		}
	}
	if !found && (d.AgentControl != "" || d.AgentStopped != "") {
		list = append(list, api.Viewer{ID: "agent", User: d.Agent, Role: console.RoleAgent, Protocol: vdi.ProtocolVNC,
			AgentControl: d.AgentControl, AgentStopped: d.AgentStopped, AgentRevoked: d.AgentRevoked})
	}
	return list
}

// handleViewerAnswer serves POST
// /api/vdi/desktops/{ns}/{member}/viewers/{id}/{answer}: the holder allows
// or refuses a watch their pool's policy (watch: consent) makes wait.
// Only the holder answers: an admin cannot allow their own watch.
func (h *Handler) handleViewerAnswer(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ref := ref(r)
	d, err := h.desktops.Desktop(r.Context(), id, ref)
	if err != nil {
		return err
	}
	if d.Holder != id.Login {
		return vdi.Errorf(vdi.EForbidden, "Only the desktop's holder allows or refuses a watch.", "You do not hold %s.", ref)
	}
	var allow bool
	switch r.PathValue("answer") {
	case "allow":
		allow = true
	case "refuse":
	case answerEnd:
		return h.takeBackControl(w, r, id, ref)
	default:
		return vdi.Errorf(vdi.EInvalid, "Answer allow, refuse or end.", "Unknown answer %q.", r.PathValue("answer"))
	}
	if !h.console.sessions.Watchers().Answer(ref, r.PathValue("id"), allow) && !h.console.answerOnPeers(r.Context(), ref, r.PathValue("id"), r.PathValue("answer")) {
		return vdi.Errorf(vdi.ENotFound, "The watch may have given up waiting; nothing to do.", "No watch of %s is waiting for an answer.", ref)
	}
	h.log.Info("watch answered", "desktop", ref, "holder", id.Login, "allowed", allow)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
