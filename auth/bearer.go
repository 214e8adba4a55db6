package auth

import (
	"context"
	"net/http"
	"strings"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Tokens verifies personal access tokens (package tokens).
type Tokens interface {
	// Verify returns the live token secret names, false for none; an
	// error is the store not answering.
	Verify(ctx context.Context, secret string) (vdi.Token, bool, error)
}

// bearer returns the token of r's Authorization header, and whether it
// has one. Only the header carries a token: never a cookie, a query or a
// form, which a page of another site could make a browser send.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, secret, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(secret), true
}

// tokenIdentity returns who r's bearer token acts as: its user with the
// groups the token keeps (plus the groups file's), limited to its pools
// and scopes,
// an admin only when an admin made it an admin token and its user is an
// admin still. A token that is not live identifies nobody; it never falls
// back to a cookie.
func (a *Authenticator) tokenIdentity(r *http.Request, secret string) (vdi.Identity, bool) {
	if a.tokens == nil {
		return vdi.Identity{}, false
	}
	t, ok, err := a.tokens.Verify(r.Context(), secret)
	if err != nil {
		a.log.Error("token not verified: the store does not answer", "err", err)
		return vdi.Identity{}, false
	}
	if !ok {
		return vdi.Identity{}, false
	}
	id := a.identity(t.Login, "", t.Groups)
	id.Admin = id.Admin && t.Admin
	id.Token = &vdi.TokenScope{ID: t.ID, Name: t.Name, Pools: t.Pools, Scopes: t.Scopes}
	return id, true
}
