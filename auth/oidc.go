package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// OIDC routes; the redirect URL registered at the provider must end in
// CallbackPath, and SignedOutPath is where the provider sends the browser
// after RP-initiated logout.
const (
	LoginPath     = "/auth/oidc/login"
	CallbackPath  = "/auth/oidc/callback"
	SignedOutPath = "/signin"
)

// OIDCConfig configures sign-in with an OpenID Provider.
type OIDCConfig struct {
	// Issuer is the provider's issuer URL (discovery is at
	// Issuer + "/.well-known/openid-configuration").
	Issuer       string
	ClientID     string
	ClientSecret Secret
	// RedirectURL is the portal's public callback URL, ending in
	// CallbackPath, e.g. https://vdi.example.com/auth/oidc/callback.
	RedirectURL string
	// Scopes default to openid, profile and email.
	Scopes []string
	// LoginClaim names the ID token claim that becomes the login (and the
	// Lease holder); default "email".
	LoginClaim string
	// GroupsClaim names the ID token claim listing the user's groups;
	// default "groups".
	GroupsClaim string
	// ProviderName is shown on the sign-in button; default the issuer's host.
	ProviderName string
	// HTTPClient talks to the provider; default one with a 10 s timeout.
	HTTPClient *http.Client
}

// oidcFlow runs the authorization-code flow. The provider's discovery
// document is fetched on first use and kept, so the portal starts even
// while the provider is down.
type oidcFlow struct {
	cfg OIDCConfig
	log *slog.Logger

	mu sync.Mutex
	d  *discovered
}

type discovered struct {
	verifier   *oidc.IDTokenVerifier
	oauth      oauth2.Config
	endSession string
}

func newOIDCFlow(cfg OIDCConfig, log *slog.Logger) (*oidcFlow, error) {
	iss, err := url.Parse(cfg.Issuer)
	if cfg.Issuer == "" || err != nil || iss.Host == "" || (iss.Scheme != "https" && !(iss.Scheme == "http" && loopbackHost(iss.Hostname()))) {
		return nil, fmt.Errorf("auth: OIDC issuer %q is not an https:// URL (set CORRAL_VDI_OIDC_ISSUER, e.g. https://accounts.example.com)", cfg.Issuer)
	}
	if cfg.ClientID == "" {
		return nil, errors.New("auth: OIDC needs a client ID: set CORRAL_VDI_OIDC_CLIENT_ID to the one the provider gave this portal")
	}
	red, err := url.Parse(cfg.RedirectURL)
	if cfg.RedirectURL == "" || err != nil || red.Host == "" || (red.Scheme != "https" && red.Scheme != "http") || red.Path != CallbackPath {
		return nil, fmt.Errorf("auth: OIDC redirect URL %q must be the portal's public URL + %s (set CORRAL_VDI_OIDC_REDIRECT_URL and register it at the provider)", cfg.RedirectURL, CallbackPath)
	}
	if len(cfg.Scopes) == 0 {
		cfg.Scopes = []string{oidc.ScopeOpenID, "profile", "email"}
	}
	if cfg.LoginClaim == "" {
		cfg.LoginClaim = "email"
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.ProviderName == "" {
		cfg.ProviderName = iss.Hostname()
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	return &oidcFlow{cfg: cfg, log: log}, nil
}

func loopbackHost(h string) bool {
	ip := net.ParseIP(h)
	return h == "localhost" || (ip != nil && ip.IsLoopback())
}

// discover fetches the provider's metadata once.
func (o *oidcFlow) discover(ctx context.Context) (*discovered, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.d != nil {
		return o.d, nil
	}
	ctx = oidc.ClientContext(ctx, o.cfg.HTTPClient)
	p, err := oidc.NewProvider(ctx, o.cfg.Issuer)
	if err != nil {
		o.log.Error("OIDC provider discovery failed; check CORRAL_VDI_OIDC_ISSUER and that the provider is reachable", "issuer", o.cfg.Issuer, "err", err)
		return nil, vdi.Errorf(vdi.EUnavailable, "Try again in a minute; if it persists, an admin can find the cause in the portal's log.",
			"The identity provider %s cannot be reached.", o.cfg.ProviderName)
	}
	var meta struct {
		EndSession string `json:"end_session_endpoint"`
	}
	p.Claims(&meta)
	o.d = &discovered{
		verifier: p.VerifierContext(ctx, &oidc.Config{ClientID: o.cfg.ClientID}),
		oauth: oauth2.Config{
			ClientID: o.cfg.ClientID, ClientSecret: o.cfg.ClientSecret.Reveal(),
			Endpoint: p.Endpoint(), RedirectURL: o.cfg.RedirectURL, Scopes: o.cfg.Scopes,
		},
		endSession: meta.EndSession,
	}
	return o.d, nil
}

// OIDCProvider returns the name of the OIDC provider to offer on the
// sign-in page, or "" when OIDC sign-in is off.
func (a *Authenticator) OIDCProvider() string {
	if a.oidc == nil {
		return ""
	}
	return a.oidc.cfg.ProviderName
}

// StartOIDC begins a sign-in that returns to next (a local path): it keeps
// a fresh state, nonce and PKCE verifier in a short-lived cookie and
// returns the provider's authorization URL to redirect to.
func (a *Authenticator) StartOIDC(w http.ResponseWriter, r *http.Request, next string) (string, error) {
	if a.oidc == nil {
		return "", vdi.Errorf(vdi.ENotFound, "Ask an admin to set up OIDC sign-in.", "OIDC sign-in is off.")
	}
	d, err := a.oidc.discover(r.Context())
	if err != nil {
		return "", err
	}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	s := a.newSession(r, flowCookieName, flowLifetime, flowCookiePath)
	s.Values["state"], s.Values["nonce"], s.Values["verifier"], s.Values["next"] = state, nonce, verifier, next
	s.Values[keyExpires] = a.now().Add(flowLifetime).Unix()
	if err := a.cookies.Save(r, w, s); err != nil {
		return "", fmt.Errorf("auth: save sign-in state: %w", err)
	}
	return d.oauth.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), nil
}

// errSignIn is what a user sees of a sign-in that failed on the way back.
func errSignIn(msg string) error {
	return vdi.Errorf(vdi.EUnauthorized, "Start again from the sign-in page.", "%s", msg)
}

// FinishOIDC completes a sign-in at the callback: it checks the state
// against this browser's flow cookie (used once), exchanges the code with
// the PKCE verifier, verifies the ID token (signature, issuer, audience,
// expiry, nonce) and starts the session. It returns where to go next.
func (a *Authenticator) FinishOIDC(w http.ResponseWriter, r *http.Request) (next string, err error) {
	if a.oidc == nil {
		return "", vdi.Errorf(vdi.ENotFound, "Ask an admin to set up OIDC sign-in.", "OIDC sign-in is off.")
	}
	flow, ferr := a.cookies.Get(r, flowCookieName)
	a.deleteCookie(w, r, flowCookieName, flowCookiePath) // single use, whatever happens
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		a.log.Warn("OIDC sign-in refused by the provider", "error", e, "description", q.Get("error_description"))
		return "", vdi.Errorf(vdi.EUnauthorized, "Start again from the sign-in page, or ask an admin whether you may use this portal.",
			"The identity provider did not sign you in (%s).", e)
	}
	state, _ := flow.Values["state"].(string)
	exp, _ := flow.Values[keyExpires].(int64)
	if ferr != nil || flow.IsNew || state == "" || a.now().Unix() >= exp {
		a.log.Warn("OIDC callback without this browser's sign-in state (expired, replayed or forged)", "remote", remoteIP(r))
		return "", errSignIn("This sign-in link has expired or was already used.")
	}
	if subtle.ConstantTimeCompare([]byte(state), []byte(q.Get("state"))) != 1 {
		a.log.Warn("OIDC callback with a wrong state", "remote", remoteIP(r))
		return "", errSignIn("The sign-in answer does not belong to this browser's sign-in.")
	}
	d, err := a.oidc.discover(r.Context())
	if err != nil {
		return "", err
	}
	ctx := oidc.ClientContext(r.Context(), a.oidc.cfg.HTTPClient)
	verifier, _ := flow.Values["verifier"].(string)
	tok, err := d.oauth.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		a.log.Warn("OIDC code exchange refused", "err", redactExchangeErr(err))
		return "", errSignIn("The identity provider refused the sign-in code (expired or already used).")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		a.log.Warn("OIDC token response without an ID token")
		return "", errSignIn("The identity provider sent no ID token.")
	}
	idt, err := d.verifier.Verify(ctx, raw)
	if err != nil {
		a.log.Warn("OIDC ID token refused", "err", err)
		return "", errSignIn("The identity provider's ID token did not verify.")
	}
	nonce, _ := flow.Values["nonce"].(string)
	if nonce == "" || subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		a.log.Warn("OIDC ID token with a wrong nonce", "subject", idt.Subject)
		return "", errSignIn("The identity provider's ID token belongs to another sign-in.")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return "", fmt.Errorf("auth: ID token claims: %w", err)
	}
	login, name, groups, err := a.oidc.user(claims)
	if err != nil {
		a.log.Warn("OIDC user refused", "subject", idt.Subject, "err", err)
		return "", vdi.Errorf(vdi.EForbidden, "Ask an admin to check CORRAL_VDI_OIDC_LOGIN_CLAIM.", "%s", err.Error())
	}
	if err := a.startSession(w, r, ModeOIDC, login, name, groups, raw); err != nil {
		return "", err
	}
	a.log.Info("signed in with OIDC", "login", login, "groups", len(groups))
	next, _ = flow.Values["next"].(string)
	return next, nil
}

// user takes the login, display name and groups from ID token claims.
func (o *oidcFlow) user(claims map[string]any) (login, name string, groups []string, err error) {
	login, _ = claims[o.cfg.LoginClaim].(string)
	if login == "" {
		return "", "", nil, fmt.Errorf("the ID token has no %q claim to use as your user name", o.cfg.LoginClaim)
	}
	if o.cfg.LoginClaim == "email" {
		// Only the boolean true vouches for the address: a provider that
		// leaves the claim out, or sends "true" as a string, does not.
		if v, ok := claims["email_verified"].(bool); !ok || !v {
			return "", "", nil, fmt.Errorf("your email address %s is not verified at the identity provider (email_verified is %v, want true); verify it there, or an admin sets CORRAL_VDI_OIDC_LOGIN_CLAIM to another claim", login, claims["email_verified"])
		}
	}
	if !ValidLogin(login) {
		return "", "", nil, fmt.Errorf("%q is not usable as a user name here (letters, digits and . _ @ + - only)", login)
	}
	name, _ = claims["name"].(string)
	if name == "" {
		name, _ = claims["preferred_username"].(string)
	}
	switch g := claims[o.cfg.GroupsClaim].(type) {
	case string:
		groups = []string{g}
	case []any:
		for _, v := range g {
			if s, ok := v.(string); ok {
				groups = append(groups, s)
			}
		}
	}
	return login, name, groups, nil
}

// SignOutURL returns where to send the browser after signing out so that
// the provider ends its session too (RP-initiated logout), or "" when the
// session did not come from OIDC or the provider offers no end_session
// endpoint. Call it before SignOut.
func (a *Authenticator) SignOutURL(r *http.Request) string {
	s := a.session(r)
	if a.oidc == nil || s == nil || s.Values[keyVia] != ModeOIDC {
		return ""
	}
	d, err := a.oidc.discover(r.Context())
	if err != nil || d.endSession == "" {
		return ""
	}
	u, err := url.Parse(d.endSession)
	if err != nil {
		return ""
	}
	back, _ := url.Parse(a.oidc.cfg.RedirectURL)
	back.Path, back.RawQuery = SignedOutPath, ""
	q := u.Query()
	q.Set("client_id", a.oidc.cfg.ClientID)
	q.Set("post_logout_redirect_uri", back.String())
	if hint, _ := s.Values[keyIDToken].(string); hint != "" {
		q.Set("id_token_hint", hint)
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// redactExchangeErr keeps the provider's error code but drops the raw
// response body, which may echo request parameters.
func redactExchangeErr(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return strings.TrimSpace(fmt.Sprintf("%s %s (HTTP %d)", re.ErrorCode, re.ErrorDescription, re.Response.StatusCode))
	}
	return err.Error()
}

func randomToken() string {
	b := make([]byte, 24)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
