package handlers

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Who is watching, cluster-wide: each replica keeps the consoles open on
// it (watchers); the replica a holder's page asks merges its own with
// every other replica's, read over signed peer requests, and waits on
// all of them for a change. A watch waiting for consent on another
// replica gets the holder's answer forwarded there.

// The kinds peer requests about viewers are signed for (relay.SignPeer);
// a console protocol has no slash, so none names a console link.
const (
	viewersKind       = "viewers/list"
	viewersAnswerKind = "viewers/answer/" // + allow or refuse
)

// peerViewersTimeout bounds a peer's answer that is not a long poll.
const peerViewersTimeout = 3 * time.Second

// listTag is the ETag of a list of viewers: a digest of what it says, so
// that it is the same whichever replica answers.
func listTag(list []api.Viewer) string {
	b, _ := json.Marshal(list)
	sum := sha256.Sum256(b)
	return `"` + hex.EncodeToString(sum[:12]) + `"`
}

// peerViewers is one replica's list of ref's viewers and its tag.
type peerViewers struct {
	list []api.Viewer
	tag  string
}

// replicas returns the other replicas' base URLs (found by their
// heartbeats, not configured) and the secret that signs requests to
// them; none for a portal that is the only one.
func (cs *consoleState) replicas(ctx context.Context) ([]string, []byte) {
	if len(cs.cfg.PeerSecret) == 0 || cs.cfg.FindPeers == nil {
		return nil, nil
	}
	return cs.cfg.FindPeers(ctx), cs.cfg.PeerSecret
}

// fetchViewers reads ref's viewers on the peer at base. With tag, it
// waits (a long poll) until they are other than tag; changed is false
// when the peer's wait ended with none.
func fetchViewers(ctx context.Context, base string, secret []byte, ref vdi.Ref, tag string) (v peerViewers, changed bool, err error) {
	h := http.Header{}
	if tag != "" {
		h.Set("If-None-Match", tag)
	}
	res, err := relay.PeerRequest(ctx, http.MethodGet, base, secret, "viewers/"+url.PathEscape(ref.Namespace)+"/"+url.PathEscape(ref.Name), viewersKind, ref.Namespace, ref.Name, h)
	if err != nil {
		return v, false, err
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusNotModified:
		return peerViewers{tag: tag}, false, nil
	case http.StatusOK:
		err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&v.list)
		v.tag = res.Header.Get("ETag")
		return v, true, err
	}
	return v, false, fmt.Errorf("peer %s: viewers of %s: %s", base, ref, res.Status)
}

// everyViewer returns ref's viewers on this replica and on every peer
// that answers, each peer's list by its URL, and the local list's
// change channel.
func (h *Handler) everyViewer(ctx context.Context, ref vdi.Ref) ([]api.Viewer, map[string]peerViewers, <-chan struct{}) {
	list, _, changed := h.console.sessions.Watchers().Snapshot(ref)
	peers, secret := h.console.replicas(ctx)
	got := map[string]peerViewers{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range peers {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, peerViewersTimeout)
			defer cancel()
			v, _, err := fetchViewers(ctx, p, secret, ref, "")
			if err != nil {
				h.log.Warn("a peer's viewers not read; listed without them", "peer", p, "desktop", ref, "err", err)
				return
			}
			mu.Lock()
			got[p] = v
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, v := range got {
		list = append(list, v.list...)
	}
	slices.SortFunc(list, func(a, b api.Viewer) int { return cmp.Or(a.Since.Compare(b.Since), strings.Compare(a.ID, b.ID)) })
	return list, got, changed
}

// watchingAnywhere reports whether user has a console of ref open that
// the holder let them watch, on this replica or on any other that
// answers (the audio socket's consent check: the watch may be on
// another replica than the sound).
func (cs *consoleState) watchingAnywhere(ctx context.Context, ref vdi.Ref, user string) bool {
	if cs.sessions.Watchers().Watching(ref, user) {
		return true
	}
	peers, secret := cs.replicas(ctx)
	for _, p := range peers {
		ctx, cancel := context.WithTimeout(ctx, peerViewersTimeout)
		v, _, err := fetchViewers(ctx, p, secret, ref, "")
		cancel()
		if err == nil && slices.ContainsFunc(v.list, console.Watches(user)) {
			return true
		}
	}
	return false
}

// awaitViewers waits until ref's viewers change on this replica (local)
// or on a peer (each long-polled from the list it had), its claim changes
// on any replica (claim), ctx ends or wait passes; it reports whether
// something changed.
func (h *Handler) awaitViewers(ctx context.Context, ref vdi.Ref, local, claim <-chan struct{}, peers map[string]peerViewers, wait time.Duration) bool {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	changed := make(chan struct{}, len(peers))
	_, secret := h.console.replicas(ctx)
	for base, v := range peers {
		go func() {
			if _, ok, err := fetchViewers(ctx, base, secret, ref, v.tag); ok || (err != nil && ctx.Err() == nil) {
				changed <- struct{}{} // changed, or gone: read everyone again
			}
		}()
	}
	select {
	case <-local:
		return true
	case <-claim:
		return true
	case <-changed:
		return true
	case <-ctx.Done():
		return false
	}
}

// handlePeerViewers serves GET /peer/v1/viewers/{ns}/{member}: this
// replica's own viewers of a desktop, for another replica that lists
// everyone's (signed for viewersKind, once). With If-None-Match it is a
// long poll, as GET …/viewers is.
func (h *peerSocket) handlePeerViewers(w http.ResponseWriter, r *http.Request) {
	ref := ref(r)
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, viewersKind, ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	list, _, changed := h.console.sessions.Watchers().Snapshot(ref)
	if listTag(list) == r.Header.Get("If-None-Match") {
		t := time.NewTimer(watchWait)
		defer t.Stop()
		select {
		case <-changed:
			list, _, _ = h.console.sessions.Watchers().Snapshot(ref)
		case <-t.C:
			w.WriteHeader(http.StatusNotModified)
			return
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("ETag", listTag(list))
	if list == nil {
		list = []api.Viewer{}
	}
	writeJSON(w, http.StatusOK, list)
}

// handlePeerViewerAnswer serves POST
// /peer/v1/viewers/{ns}/{member}/{id}/{answer}: the holder's answer to a
// watch waiting on this replica, given on another, which checked that
// they hold the desktop (signed for the answer, once). 404 when no such
// watch waits here.
func (h *peerSocket) handlePeerViewerAnswer(w http.ResponseWriter, r *http.Request) {
	ref, answer := ref(r), r.PathValue("answer")
	if _, err := h.console.peers.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, viewersAnswerKind+answer, ref.Namespace, ref.Name); err != nil {
		h.refusePeer(w, r, ref, err)
		return
	}
	if answer != "allow" && answer != "refuse" && answer != answerEnd {
		h.writeAPIError(w, r, vdi.Errorf(vdi.EInvalid, "Answer allow, refuse or end.", "Unknown answer %q.", answer))
		return
	}
	if answer == answerEnd && !h.console.sessions.Watchers().End(ref, r.PathValue("id")) {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Ask the other replicas.", "No console %q of %s with control given here.", r.PathValue("id"), ref))
		return
	}
	if answer != answerEnd && !h.console.sessions.Watchers().Answer(ref, r.PathValue("id"), answer == "allow") {
		h.writeAPIError(w, r, vdi.Errorf(vdi.ENotFound, "Ask the other replicas.", "No watch %q of %s waits here.", r.PathValue("id"), ref))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// answerOnPeers forwards the holder's answer to watch id of ref to the
// replica where it waits; it reports whether one took it.
func (cs *consoleState) answerOnPeers(ctx context.Context, ref vdi.Ref, id, answer string) bool {
	peers, secret := cs.replicas(ctx)
	for _, p := range peers {
		ctx, cancel := context.WithTimeout(ctx, peerViewersTimeout)
		res, err := relay.PeerRequest(ctx, http.MethodPost, p, secret,
			"viewers/"+url.PathEscape(ref.Namespace)+"/"+url.PathEscape(ref.Name)+"/"+url.PathEscape(id)+"/"+answer, viewersAnswerKind+answer, ref.Namespace, ref.Name, nil)
		cancel()
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusNoContent {
				return true
			}
		}
	}
	return false
}
