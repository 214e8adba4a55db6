package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// myHistoryRows is how many of their sessions a user's page lists.
const myHistoryRows = 200

// handleMyHistory serves GET /history: the signed-in user's own console
// sessions (never anyone else's: the filter is their login, not a query).
func (h *Handler) handleMyHistory(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
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
	h.render(w, r, http.StatusOK, views.MyHistory(views.MyHistoryProps{Page: h.pageProps("My sessions", id), Sessions: sessionRows(mine)}))
	return nil
}
