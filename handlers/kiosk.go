package handlers

import (
	"net/http"
	"net/url"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleKiosk serves GET /kiosk/{pool}: claim a desktop of the pool (or get
// back the one the visitor holds) and show it full-screen with no portal
// chrome. ?ns= picks the namespace when pools of that name exist in
// several. When none is free the page says so and tries again by itself.
//
// A GET changes nothing unless the visitor opened the page: any site can
// embed or link the kiosk URL, and identity headers from tailscale serve
// ride along. So only a top-level navigation the browser marks as typed,
// bookmarked or same-site (Sec-Fetch-Site none or same-origin,
// Sec-Fetch-Dest document) claims; any other shows the desktop already
// held, or a button that claims with a same-origin POST.
func (h *kioskPages) handleKiosk(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	name := r.PathValue("pool")
	ns, err := h.kioskNamespace(r, name)
	if err != nil {
		return err
	}
	props := views.KioskProps{Page: h.pageProps(name, id), Pool: name}
	props.Recorded, props.RecordInput, props.RecordOwn = h.poolRecorded(r, id, ns, name)
	if !kioskNavigation(r) {
		d, ok, err := h.heldDesktop(r, id, ns, name)
		if err != nil {
			return err
		}
		if !ok {
			props.ContinueURL = "/kiosk/" + url.PathEscape(name) + "?ns=" + url.QueryEscape(ns)
			h.render(w, r, http.StatusOK, views.Kiosk(props))
			return nil
		}
		return h.renderKiosk(w, r, id, props, d)
	}
	d, err := h.desktops.ClaimStarting(r.Context(), id, ns, name)
	if err != nil {
		return h.renderKioskWait(w, r, props, err)
	}
	return h.renderKiosk(w, r, id, props, d)
}

// handleKioskClaim serves POST /kiosk/{pool}: the kiosk page's button
// claims (cross-origin protection guards it like every form), then the
// browser goes back to the kiosk page, which shows the claimed desktop.
// The redirect goes out before the claim lets its user's claim lock go
// (vdi.WithAnswerFirst), as the "Get a desktop" form's does.
func (h *kioskPages) handleKioskClaim(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	name := r.PathValue("pool")
	ns, err := h.kioskNamespace(r, name)
	if err != nil {
		return err
	}
	ctx, answered := vdi.WithAnswerFirst(r.Context())
	defer answered()
	if _, err := h.desktops.ClaimStarting(ctx, id, ns, name); err != nil {
		return h.renderKioskWait(w, r, views.KioskProps{Page: h.pageProps(name, id), Pool: name}, err)
	}
	w.Header().Set("Content-Length", "0") // a POST's redirect has no body
	http.Redirect(w, r, "/kiosk/"+url.PathEscape(name)+"?ns="+url.QueryEscape(ns), http.StatusSeeOther)
	sendNow(w)
	return nil
}

// kioskNavigation reports whether r is a page load the visitor started
// (typed, bookmarked, reloaded, or from the portal's own pages).
func kioskNavigation(r *http.Request) bool {
	site := r.Header.Get("Sec-Fetch-Site")
	return (site == "none" || site == "same-origin") && r.Header.Get("Sec-Fetch-Dest") == "document"
}

// kioskNamespace returns the namespace of the kiosk's pool: ?ns=, or the
// only pool of that name.
func (h *kioskPages) kioskNamespace(r *http.Request, name string) (string, error) {
	if ns := r.URL.Query().Get("ns"); ns != "" {
		return ns, nil
	}
	// Found whoever may use it, so that the claim can say whom it is for.
	nss, err := h.desktops.PoolNamespaces(r.Context(), name)
	if err != nil {
		return "", err
	}
	switch len(nss) {
	case 0:
		return "", vdi.Errorf(vdi.ENotFound, "Check the kiosk link's pool name with an admin.", "No pool %s.", name)
	case 1:
		return nss[0], nil
	}
	return "", vdi.Errorf(vdi.EInvalid, "Add ?ns=<namespace> to the kiosk link.", "Pools named %s exist in several namespaces.", name)
}

// heldDesktop returns the desktop of pool ns/name that id holds, if any.
func (h *kioskPages) heldDesktop(r *http.Request, id vdi.Identity, ns, name string) (vdi.Desktop, bool, error) {
	ds, err := h.desktops.Desktops(r.Context(), id, false)
	if err != nil {
		return vdi.Desktop{}, false, err
	}
	for _, d := range ds {
		if d.Namespace == ns && d.Pool == name && d.Holder == id.Login {
			return d, true, nil
		}
	}
	return vdi.Desktop{}, false, nil
}

// renderKioskWait shows why no desktop could be claimed (none free,
// backend unavailable); the page retries. Other errors are errors.
func (h *kioskPages) renderKioskWait(w http.ResponseWriter, r *http.Request, props views.KioskProps, err error) error {
	code := vdi.ErrorCode(err)
	if code != vdi.EConflict && code != vdi.EUnavailable {
		return err
	}
	status, msg, hint := h.errorText(r, err)
	props.Msg, props.Hint = msg, hint
	h.render(w, r, status, views.Kiosk(props))
	return nil
}

// renderKiosk shows desktop d full-screen.
func (h *kioskPages) renderKiosk(w http.ResponseWriter, r *http.Request, id vdi.Identity, props views.KioskProps, d vdi.Desktop) error {
	base := "/api/vdi/desktops/" + d.Namespace + "/" + d.Name
	props.Desktop, props.ConnectURL, props.ReleaseURL = d.Namespace+"/"+d.Name, base+"/connect", base+"/release"
	props.Recorded, props.RecordInput, props.RecordOwn = d.Recorded, d.RecordInput, d.RecordOwn
	likely := likelyConsole(d, "")
	props.Likely = string(likely)
	props.Connect = h.console.pageConnect(r.Context(), id, d, "", likely)
	h.console.dial.ProbeAhead(d)
	h.console.warmScreen(id, d, likely)
	h.render(w, r, http.StatusOK, views.Kiosk(props))
	return nil
}
