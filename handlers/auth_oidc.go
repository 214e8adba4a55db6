package handlers

import (
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// OIDCFlow is the OpenID Connect sign-in an Identifier may also offer
// (auth.Authenticator does when OIDC mode is on).
type OIDCFlow interface {
	// OIDCProvider names the provider, or is "" when OIDC sign-in is off.
	OIDCProvider() string
	// StartOIDC returns the provider URL that begins a sign-in ending at next.
	StartOIDC(w http.ResponseWriter, r *http.Request, next string) (string, error)
	// FinishOIDC completes the sign-in at the callback and returns next.
	FinishOIDC(w http.ResponseWriter, r *http.Request) (string, error)
	// SignOutURL is the provider's end-session URL for r's session, or "".
	SignOutURL(r *http.Request) string
}

// oidc returns the identifier's OIDC sign-in, or nil when it is off.
func (h *signIn) oidc() OIDCFlow {
	if o, ok := h.auth.(OIDCFlow); ok && o.OIDCProvider() != "" {
		return o
	}
	return nil
}

// handleOIDCLogin serves GET /auth/oidc/login: off to the provider.
func (h *signIn) handleOIDCLogin(w http.ResponseWriter, r *http.Request) {
	o := h.oidc()
	if o == nil {
		h.signInError(w, r, vdi.Errorf(vdi.ENotFound, "Ask an admin to set up OIDC sign-in.", "OIDC sign-in is off."))
		return
	}
	to, err := o.StartOIDC(w, r, safeNext(r.URL.Query().Get("next")))
	if err != nil {
		h.signInError(w, r, err)
		return
	}
	http.Redirect(w, r, to, http.StatusFound)
}

// handleOIDCCallback serves GET /auth/oidc/callback: the provider's answer.
func (h *signIn) handleOIDCCallback(w http.ResponseWriter, r *http.Request) {
	o := h.oidc()
	if o == nil {
		h.signInError(w, r, vdi.Errorf(vdi.ENotFound, "Ask an admin to set up OIDC sign-in.", "OIDC sign-in is off."))
		return
	}
	next, err := o.FinishOIDC(w, r)
	if err != nil {
		h.signInError(w, r, err)
		return
	}
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

// signInError renders a failed sign-in as an error page.
func (h *signIn) signInError(w http.ResponseWriter, r *http.Request, err error) {
	code, msg, hint := h.errorText(r, err)
	h.render(w, r, code, views.Error(views.ErrorProps{
		Page: h.pageProps("Sign-in failed", vdi.Identity{}), Status: code, Msg: msg, Hint: hint,
	}))
}
