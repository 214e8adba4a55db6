package handlers

import (
	"net/http"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// signInAllowed reports whether the sign-in-by-name page may be used: only
// in dev mode and only while the portal listens on loopback.
func (h *Handler) signInAllowed() bool { return h.auth.DevSignIn() && h.loopback }

// handleSignInPage serves GET /signin.
func (h *Handler) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	if !h.signInAllowed() {
		h.refuseSignIn(w, r)
		return
	}
	next := safeNext(r.URL.Query().Get("next"))
	h.render(w, r, http.StatusOK, views.SignIn(views.SignInProps{Page: h.pageProps("Sign in", vdi.Identity{}), Next: next}))
}

// handleSignIn serves POST /signin.
func (h *Handler) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if !h.signInAllowed() {
		h.refuseSignIn(w, r)
		return
	}
	login, next := r.PostFormValue("login"), safeNext(r.PostFormValue("next"))
	if err := h.auth.SignIn(w, r, login); err != nil {
		_, msg, hint := h.errorText(r, err)
		h.render(w, r, http.StatusBadRequest, views.SignIn(views.SignInProps{
			Page: h.pageProps("Sign in", vdi.Identity{}), Next: next, Login: login, Error: msg + " " + hint}))
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleSignOut serves POST /signout.
func (h *Handler) handleSignOut(w http.ResponseWriter, r *http.Request) {
	if err := h.auth.SignOut(w, r); err != nil {
		h.log.Error("sign out", "err", err)
	}
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
}

func (h *Handler) refuseSignIn(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusForbidden, views.Error(views.ErrorProps{
		Page:   h.pageProps("Sign-in by name is off", vdi.Identity{}),
		Status: http.StatusForbidden,
		Msg:    "Signing in by name is only offered while the portal listens on loopback.",
		Hint:   "Reach the portal through its identity proxy (e.g. tailscale serve), which signs you in.",
	}))
}

// safeNext returns next when it is a path on this site, else "/", so the
// sign-in page never redirects elsewhere.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) {
		return "/"
	}
	return next
}
