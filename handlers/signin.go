package handlers

import (
	"errors"
	"net/http"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// signInRefusal returns why the sign-in-by-name page may not be used for
// r, or nil: it is on only in dev mode, while the portal listens on
// loopback, and for a request straight from a browser on this machine
// (see auth.DirectLoopback); a proxy's users never get it.
func (h *signIn) signInRefusal(r *http.Request) error {
	if !h.auth.DevSignIn() {
		return vdi.Errorf(vdi.EForbidden, "Sign in through your identity provider or proxy.", "Signing in by name is off (CORRAL_VDI_AUTH has no dev).")
	}
	if !h.loopback {
		return vdi.Errorf(vdi.EForbidden, "Reach the portal through its identity proxy (e.g. tailscale serve), which signs you in.",
			"Signing in by name is only offered while the portal listens on loopback (CORRAL_VDI_LISTEN).")
	}
	return auth.DirectLoopback(r, "Signing in by name",
		"Sign in through your identity provider or proxy (e.g. tailscale serve adds your identity), or open the portal at http://127.0.0.1 on its own machine.")
}

// signInProps returns the sign-in page's props for the enabled ways in.
func (h *signIn) signInProps(r *http.Request, next string) views.SignInProps {
	p := views.SignInProps{Page: h.pageProps("Sign in", vdi.Identity{}), Next: next, ByName: h.signInRefusal(r) == nil}
	if o := h.oidc(); o != nil {
		p.Provider = o.OIDCProvider()
	}
	return p
}

// handleSignInPage serves GET /signin.
func (h *signIn) handleSignInPage(w http.ResponseWriter, r *http.Request) {
	p := h.signInProps(r, safeNext(r.URL.Query().Get("next")))
	if !p.ByName && p.Provider == "" {
		h.refuseSignIn(w, r)
		return
	}
	_, p.SignedOut = r.URL.Query()["signed-out"]
	h.render(w, r, http.StatusOK, views.SignIn(p))
}

// handleSignIn serves POST /signin.
func (h *signIn) handleSignIn(w http.ResponseWriter, r *http.Request) {
	if h.signInRefusal(r) != nil {
		h.refuseSignIn(w, r)
		return
	}
	login, next := r.PostFormValue("login"), safeNext(r.PostFormValue("next"))
	if err := h.auth.SignIn(w, r, login); err != nil {
		_, msg, hint := h.errorText(r, err)
		p := h.signInProps(r, next)
		p.Login, p.Error = login, msg+" "+hint
		h.render(w, r, http.StatusBadRequest, views.SignIn(p))
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleSignOut serves POST /signout. An OIDC session also ends at the
// provider when it offers RP-initiated logout.
func (h *signIn) handleSignOut(w http.ResponseWriter, r *http.Request) {
	var provider, to string
	if o := h.oidc(); o != nil {
		provider, to = o.OIDCProvider(), o.SignOutURL(r)
	}
	if err := h.auth.SignOut(w, r); err != nil {
		// The cookie is gone from this browser, but the sign-out may not
		// hold elsewhere yet: say so rather than pretend.
		h.writePageError(w, r, vdi.Identity{}, "Sign-out not saved yet", err)
		return
	}
	if to != "" {
		h.render(w, r, http.StatusOK, views.SignOut(views.SignOutProps{Page: h.pageProps("Signed out", vdi.Identity{}), Provider: provider, URL: to}))
		return
	}
	http.Redirect(w, r, "/signin?signed-out", http.StatusSeeOther)
}

// refuseSignIn answers a sign-in by name that is not offered, saying why.
func (h *signIn) refuseSignIn(w http.ResponseWriter, r *http.Request) {
	err := &vdi.Error{Code: vdi.EForbidden, Msg: "Signing in by name is off.", Hint: "Sign in through your identity provider or proxy."}
	if e := new(vdi.Error); errors.As(h.signInRefusal(r), &e) {
		err = &vdi.Error{Code: vdi.EForbidden, Msg: e.Msg, Hint: e.Hint}
	}
	h.writePageError(w, r, vdi.Identity{}, "Sign-in by name is off", err)
}

// safeNext returns next when it is a path on this site, else "/", so the
// sign-in page never redirects elsewhere. Browsers drop tabs and newlines
// from URLs ("/\t/evil.example" becomes "//evil.example"), so any control
// character or space makes it unsafe too.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, `\`) ||
		strings.IndexFunc(next, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return "/"
	}
	return next
}
