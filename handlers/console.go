package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleConsolePage serves GET /desktops/{ns}/{member}: the console.
func (h *Handler) handleConsolePage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	d, err := h.desktops.Desktop(r.Context(), id, ref(r))
	if err != nil {
		return err
	}
	h.render(w, r, http.StatusOK, views.Console(views.ConsoleProps{
		Page:       h.pageProps(d.Name, id),
		Desktop:    d,
		ConnectURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name + "/connect",
		DesktopURL: "/api/vdi/desktops/" + d.Namespace + "/" + d.Name,
		USB:        h.usbHint(r, id, d),
	}))
	return nil
}
