package handlers

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// watchWait bounds one long poll of GET …/viewers: the page asks again
// after it, so a proxy's idle timeout (often 60 s) never cuts one.
const watchWait = 25 * time.Second

// watchers keeps who, other than the holder, has a console of each desktop
// open (an admin watching or helping), so that the holder's console page
// says so within a second. The zero value is ready.
type watchers struct {
	mu sync.Mutex
	by map[vdi.Ref]*watched
}

// watched is one desktop's watchers, a version that counts changes, and
// a channel closed (and replaced) at each change for long polls; asks
// holds the holder's answer channel of each watch waiting for consent.
type watched struct {
	list    []api.Viewer
	version uint64
	changed chan struct{}
	asks    map[string]chan bool
	ends    map[string]func() // of the consoles the holder may end (Granted)
}

func (w *watchers) get(ref vdi.Ref) *watched {
	if w.by == nil {
		w.by = map[vdi.Ref]*watched{}
	}
	d := w.by[ref]
	if d == nil {
		d = &watched{changed: make(chan struct{}), version: 1}
		w.by[ref] = d
	}
	return d
}

// bump publishes a change of d.
func (d *watched) bump() {
	d.version++
	close(d.changed)
	d.changed = make(chan struct{})
}

// touch wakes the long polls of ref's viewers: something they show
// besides the list changed (an agent's oversight, through this replica).
func (w *watchers) touch(ref vdi.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.get(ref).bump()
}

// watching reports whether user has a console of ref open that the
// holder let them watch (a watch waiting for consent does not count).
func (w *watchers) watching(ref vdi.Ref, user string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.get(ref).list, watches(user))
}

// watches returns whether a viewer is user with a console the holder let
// them watch.
func watches(user string) func(api.Viewer) bool {
	return func(v api.Viewer) bool { return v.User == user && (v.Role == "watch" || v.Role == "control") }
}

// add notes v on ref's console until the returned func is called; end,
// when not nil, is how the holder ends that console (answer "end").
func (w *watchers) add(ref vdi.Ref, v api.Viewer, end func()) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.get(ref)
	v.ID = watcherIDs + strconv.FormatUint(d.version, 10) + "-" + strconv.Itoa(len(d.list))
	v.Granted = end != nil
	d.list = append(d.list, v)
	if end != nil {
		if d.ends == nil {
			d.ends = map[string]func(){}
		}
		d.ends[v.ID] = end
	}
	d.bump()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		d := w.get(ref)
		d.list = slices.DeleteFunc(d.list, func(x api.Viewer) bool { return x.ID == v.ID })
		delete(d.ends, v.ID)
		d.bump()
		if len(d.list) == 0 && d.version > 1<<62 {
			delete(w.by, ref) // keep versions growing; drop only what cannot wrap
		}
	}
}

// watcherIDs starts the ID of each watch on this replica, so that the
// holder's answer finds the one replica where a watch waits.
var watcherIDs = newID()[:8] + "-"

// consentWait is how long a watch waits for the holder's answer.
const consentWait = 60 * time.Second

// roleAsks marks a watch waiting for the holder's consent.
const roleAsks = "asks"

// await lists v as asking to watch ref and waits for the holder's answer,
// consentWait or ctx; it reports whether the holder allowed it.
func (w *watchers) await(ctx context.Context, ref vdi.Ref, v api.Viewer) bool {
	return w.awaitFor(ctx, ref, v, consentWait)
}

// awaitFor is await waiting at most wait.
func (w *watchers) awaitFor(ctx context.Context, ref vdi.Ref, v api.Viewer, wait time.Duration) bool {
	v.Role, v.Wants = roleAsks, v.Role
	remove := w.add(ref, v, nil)
	defer remove()
	w.mu.Lock()
	d := w.get(ref)
	id := d.list[len(d.list)-1].ID
	answer := make(chan bool, 1)
	if d.asks == nil {
		d.asks = map[string]chan bool{}
	}
	d.asks[id] = answer
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.get(ref).asks, id)
		w.mu.Unlock()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ok := <-answer:
		return ok
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// answer gives the holder's answer to the watch id of ref; it reports
// whether such a watch was waiting.
func (w *watchers) answer(ref vdi.Ref, id string, allow bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.get(ref).asks[id]
	if ok {
		c <- allow
		delete(w.get(ref).asks, id)
	}
	return ok
}

// end ends the console id of ref that the holder may end (add's end);
// it reports whether such a console is open here.
func (w *watchers) end(ref vdi.Ref, id string) bool {
	w.mu.Lock()
	end, ok := w.get(ref).ends[id]
	w.mu.Unlock()
	if ok {
		end()
	}
	return ok
}

// snapshot returns ref's watchers, their version, and a channel closed at
// the next change.
func (w *watchers) snapshot(ref vdi.Ref) ([]api.Viewer, uint64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.get(ref)
	return slices.Clone(d.list), d.version, d.changed
}

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
			list = slices.DeleteFunc(list, func(v api.Viewer) bool { return v.Role == roleAsks })
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
		if list[i].Role == roleAgent {
			list[i].AgentControl, list[i].AgentStopped = d.AgentControl, d.AgentStopped
			found = true
		}
	}
	if !found && (d.AgentControl != "" || d.AgentStopped != "") {
		list = append(list, api.Viewer{ID: "agent", User: d.Agent, Role: roleAgent, Protocol: vdi.ProtocolVNC,
			AgentControl: d.AgentControl, AgentStopped: d.AgentStopped})
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
	if !h.console.watchers.answer(ref, r.PathValue("id"), allow) && !h.console.answerOnPeers(r.Context(), ref, r.PathValue("id"), r.PathValue("answer")) {
		return vdi.Errorf(vdi.ENotFound, "The watch may have given up waiting; nothing to do.", "No watch of %s is waiting for an answer.", ref)
	}
	h.log.Info("watch answered", "desktop", ref, "holder", id.Login, "allowed", allow)
	w.WriteHeader(http.StatusNoContent)
	return nil
}
