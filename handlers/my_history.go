package handlers

import (
	"context"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// myHistoryRows is how many of their sessions a user's page lists.
const myHistoryRows = 200

// handleMyHistory serves GET /history: the signed-in user's own console
// sessions (never anyone else's: the filter is their login, not a query),
// with a Play link on each recorded one their pool lets them play back.
func (h *historyPages) handleMyHistory(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	sessions, err := h.history.SessionHistory(r.Context(), vdi.HistoryFilter{User: id.Login, Limit: myHistoryRows})
	if err != nil {
		return err
	}
	mine := sessions[:0]
	for _, s := range sessions {
		if s.Login == id.Login { // the filter also matches holders named by others' rows
			mine = append(mine, s)
		}
	}
	playable, err := h.playableOf(r.Context(), id, mine)
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, views.MyHistory(views.MyHistoryProps{Page: h.pageProps("My sessions", id), Sessions: sessionRows(mine), Playable: playable}))
	return nil
}

// playableOf says which of the user's sessions have a recording they may
// play back themselves (vdi.Service.MayPlayRecording), asking once per
// desktop. Without recordings kept, none.
func (h *historyPages) playableOf(ctx context.Context, id vdi.Identity, sessions []vdi.Session) (map[string]bool, error) {
	if h.recordings == nil || len(sessions) == 0 {
		return nil, nil
	}
	ids := make([]string, len(sessions))
	for i, s := range sessions {
		ids[i] = s.ID
	}
	recorded, err := h.recordings.Recorded(ctx, ids)
	if err != nil {
		return nil, err
	}
	allowed := map[vdi.Ref]bool{}
	out := map[string]bool{}
	for _, s := range sessions {
		if !recorded[s.ID] {
			continue
		}
		ref := vdi.Ref{Namespace: s.Namespace, Name: s.Member}
		ok, seen := allowed[ref]
		if !seen {
			ok = h.desktops.MayPlayRecording(ctx, id, s.Login, ref) == nil
			allowed[ref] = ok
		}
		out[s.ID] = ok
	}
	return out, nil
}
