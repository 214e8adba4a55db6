package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleKiosk serves GET /kiosk/{pool}: claim a desktop of the pool (or get
// back the one the visitor holds) and show it full-screen with no portal
// chrome. ?ns= picks the namespace when pools of that name exist in
// several. When none is free the page says so and tries again by itself.
func (h *Handler) handleKiosk(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	// Opening the page claims a desktop: only a navigation may, never an
	// image or fetch that another site embeds (identity headers from
	// tailscale serve ride along with those too).
	if mode := r.Header.Get("Sec-Fetch-Mode"); mode != "" && mode != "navigate" {
		return vdi.Errorf(vdi.EForbidden, "Open the kiosk link in the browser's address bar.", "The kiosk page only opens as a page.")
	}
	name, ns := r.PathValue("pool"), r.URL.Query().Get("ns")
	if ns == "" {
		// Found whoever may use it, so that the claim can say whom it is for.
		nss, err := h.desktops.PoolNamespaces(r.Context(), name)
		if err != nil {
			return err
		}
		switch len(nss) {
		case 0:
			return vdi.Errorf(vdi.ENotFound, "Check the kiosk link's pool name with an admin.", "No pool %s.", name)
		case 1:
			ns = nss[0]
		default:
			return vdi.Errorf(vdi.EInvalid, "Add ?ns=<namespace> to the kiosk link.", "Pools named %s exist in several namespaces.", name)
		}
	}
	props := views.KioskProps{Page: h.pageProps(name, id), Pool: name}
	d, err := h.desktops.Claim(r.Context(), id, ns, name)
	if err != nil {
		code := vdi.ErrorCode(err)
		if code != vdi.EConflict && code != vdi.EUnavailable {
			return err
		}
		status, msg, hint := h.errorText(r, err)
		props.Msg, props.Hint = msg, hint
		h.render(w, r, status, views.Kiosk(props))
		return nil
	}
	base := "/api/vdi/desktops/" + d.Namespace + "/" + d.Name
	props.Desktop, props.ConnectURL, props.ReleaseURL = d.Namespace+"/"+d.Name, base+"/connect", base+"/release"
	h.render(w, r, http.StatusOK, views.Kiosk(props))
	return nil
}
