package handlers

import (
	"context"
	"net/http"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/views"
)

// Tokens makes, lists and revokes personal access tokens (package tokens).
type Tokens interface {
	Create(ctx context.Context, by vdi.Identity, req api.TokenRequest) (api.Token, error)
	List(ctx context.Context, by vdi.Identity, all bool) ([]api.Token, error)
	Revoke(ctx context.Context, by vdi.Identity, id string) error
}

// tokenRoutes serves the tokens API and the Tokens page.
type tokenRoutes struct {
	*renderer
	tokens   Tokens
	desktops Desktops
}

// noTokens is the refusal of a portal that keeps no tokens.
var noTokens = vdi.Errorf(vdi.EUnavailable, "Ask the operator: this portal runs without a token store.", "Personal access tokens are not available.")

// handleTokenCreate serves POST /api/vdi/tokens: 201 with the token, whose
// secret is in this answer only.
func (h *tokenRoutes) handleTokenCreate(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if h.tokens == nil {
		return noTokens
	}
	var req api.TokenRequest
	if err := decodeOptionalJSON(r, &req); err != nil {
		return err
	}
	t, err := h.tokens.Create(r.Context(), id, req)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, t)
	return nil
}

// handleTokensList serves GET /api/vdi/tokens (an admin's ?all=1: every
// user's), with each token's last use.
func (h *tokenRoutes) handleTokensList(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if h.tokens == nil {
		return noTokens
	}
	list, err := h.tokens.List(r.Context(), id, r.URL.Query().Get("all") == "1")
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, list)
	return nil
}

// handleTokenDelete serves DELETE /api/vdi/tokens/{id}: the token stops
// working at once.
func (h *tokenRoutes) handleTokenDelete(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if h.tokens == nil {
		return noTokens
	}
	if err := h.tokens.Revoke(r.Context(), id, r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// handleTokensPage serves GET /tokens: the user's tokens and the form
// that makes one.
func (h *tokenRoutes) handleTokensPage(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	return h.renderTokens(w, r, id, http.StatusOK, nil, "")
}

// handleTokenForm serves POST /tokens: the form's token, shown once on
// the page this answers with; a refusal is said on the same page.
func (h *tokenRoutes) handleTokenForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if h.tokens == nil {
		return noTokens
	}
	if err := r.ParseForm(); err != nil {
		return vdi.Errorf(vdi.EInvalid, "Send the form again.", "The form could not be read.")
	}
	scopes := r.PostForm["scopes"]
	if len(scopes) == 0 { // the API's "none named" is all three; a form left empty means none
		return h.renderTokens(w, r, id, http.StatusBadRequest, nil, "A token needs a scope. Tick what it may do: see, act or claim.")
	}
	t, err := h.tokens.Create(r.Context(), id, api.TokenRequest{Name: r.PostForm.Get("name"), Pools: r.PostForm["pools"], Scopes: scopes, Expires: r.PostForm.Get("expires")})
	if err != nil {
		if vdi.ErrorCode(err) == vdi.EInvalid || vdi.ErrorCode(err) == vdi.EConflict {
			code, msg, hint := h.errorText(r, err)
			return h.renderTokens(w, r, id, code, nil, msg+" "+hint)
		}
		return err
	}
	row := tokenRow(t)
	return h.renderTokens(w, r, id, http.StatusCreated, &row, "")
}

// handleTokenRevokeForm serves POST /tokens/{id}/revoke, then shows the
// page again.
func (h *tokenRoutes) handleTokenRevokeForm(w http.ResponseWriter, r *http.Request, id vdi.Identity) error {
	if h.tokens == nil {
		return noTokens
	}
	if err := h.tokens.Revoke(r.Context(), id, r.PathValue("id")); err != nil {
		return err
	}
	http.Redirect(w, r, "/tokens", http.StatusSeeOther)
	return nil
}

func (h *tokenRoutes) renderTokens(w http.ResponseWriter, r *http.Request, id vdi.Identity, code int, made *views.TokenRow, problem string) error {
	props := views.TokensProps{Page: h.pageProps("Tokens", id), Made: made, Error: problem}
	if h.tokens != nil {
		list, err := h.tokens.List(r.Context(), id, false)
		if err != nil {
			return err
		}
		for _, t := range list {
			props.Tokens = append(props.Tokens, tokenRow(t))
		}
	}
	pools, err := h.desktops.Pools(r.Context(), id)
	if err != nil {
		return err
	}
	for _, p := range pools {
		props.Pools = append(props.Pools, p.Namespace+"/"+p.Name)
	}
	h.render(w, r, code, views.Tokens(props))
	return nil
}

func tokenRow(t api.Token) views.TokenRow {
	return views.TokenRow{ID: t.ID, Name: t.Name, Pools: t.Pools, Scopes: t.Scopes, Admin: t.Admin, Expires: t.Expires, LastUsed: t.LastUsed, Secret: t.Token}
}
