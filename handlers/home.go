package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// handleHome serves GET /: the user's desktops and the pools.
func (h *userDesktops) handleHome(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	mine, err := h.desktops.Desktops(r.Context(), id, false)
	if err != nil {
		return err
	}
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return err
	}
	shared, err := h.desktops.SharedWithMe(r.Context(), id)
	if err != nil {
		return err
	}
	rows := make([]views.PoolRow, len(pools))
	for i, p := range pools {
		rows[i].PoolStatus = p
		for _, d := range mine {
			if d.Namespace == p.Namespace && d.Pool == p.Name {
				rows[i].Mine = d.Name
			}
		}
	}
	h.render(w, r, http.StatusOK, views.Home(views.HomeProps{Page: h.pageProps("My desktops", id), Desktops: mine, Pools: rows, Shared: shared,
		Notice: homeNotice(r.URL.Query(), rows, mine)}))
	return nil
}

// handleClaimForm serves POST /pools/{ns}/{pool}/claim: the "Get a desktop"
// button. It claims, starts and redirects to the console; a refusal
// redirects to the home page's notice of it, so that reloading the page
// that follows never claims again (post/redirect/get). The redirect goes
// out before the claim lets its user's claim lock go (vdi.WithAnswerFirst).
func (h *userDesktops) handleClaimForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	ns, pool := r.PathValue("ns"), r.PathValue("pool")
	ctx, answered := vdi.WithAnswerFirst(r.Context())
	defer answered()
	d, err := h.desktops.ClaimStarting(ctx, id, ns, pool)
	if err != nil {
		h.errorText(r, err) // logs a cause that is the portal's to fix
		http.Redirect(w, r, noticeURL(claimNotice(err), ns, pool), http.StatusSeeOther)
		return nil
	}
	h.console.dial.ProbeAhead(d)
	w.Header().Set("Content-Length", "0") // a POST's redirect has no body
	http.Redirect(w, r, "/desktops/"+d.Namespace+"/"+d.Name, http.StatusSeeOther)
	sendNow(w)
	return nil
}

// handleReleaseForm serves POST /desktops/{ns}/{member}/release: the
// Release button.
func (h *userDesktops) handleReleaseForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if err := h.desktops.Release(r.Context(), id, ref(r), r.PostFormValue("reason")); err != nil {
		return err
	}
	http.Redirect(w, r, noticeURL(noticeReleased, r.PathValue("ns"), r.PathValue("member")), http.StatusSeeOther)
	return nil
}

// handleStartForm serves POST /desktops/{ns}/{member}/start: a stopped
// desktop's "Start it again" (fresh=1: "Get a fresh desktop") on the home
// page. It redirects to the desktop's console.
func (h *userDesktops) handleStartForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	defer h.console.dial.Forget(ref(r))
	start := h.desktops.Start
	if r.PostFormValue("fresh") == "1" {
		start = h.desktops.StartFresh
	}
	if err := start(r.Context(), id, ref(r)); err != nil {
		return err
	}
	http.Redirect(w, r, "/desktops/"+r.PathValue("ns")+"/"+r.PathValue("member"), http.StatusSeeOther)
	return nil
}

// ref returns the desktop a request's path names.
func ref(r *http.Request) vdi.Ref {
	return vdi.Ref{Namespace: r.PathValue("ns"), Name: r.PathValue("member")}
}
