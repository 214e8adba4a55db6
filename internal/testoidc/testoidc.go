// Package testoidc runs a real OpenID Provider (zitadel/oidc's op package)
// in-process for tests: discovery, JWKS, the authorization endpoint with
// PKCE, the token endpoint, end_session, and a small password login page
// with its own browser session. Only the storage (one client, a few users)
// and the login page are written here; the protocol is the library's.
package testoidc

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is an account at the provider.
type User struct {
	ID       string
	Username string
	Password string
	Email    string
	Name     string
	Groups   []string
	// EmailUnverified leaves email_verified out of the user's claims, as
	// providers do for an address they have not checked.
	EmailUnverified bool
}

// Config configures a provider.
type Config struct {
	ClientID     string
	ClientSecret string
	// RedirectURIs are the registered redirect URIs of the client.
	RedirectURIs []string
	// PostLogoutRedirectURIs are where end_session may send the browser.
	PostLogoutRedirectURIs []string
	Users                  []User
	// GroupsClaim names the ID token claim listing a user's groups
	// (default "groups").
	GroupsClaim string
	// IDTokenLifetime defaults to an hour.
	IDTokenLifetime time.Duration
}

// OP is a running OpenID Provider.
type OP struct {
	// Issuer is the provider's URL, e.g. http://127.0.0.1:41234.
	Issuer string

	srv     *http.Server
	storage *storage

	mu     sync.Mutex
	tamper func(idToken string) string
	codes  []string
}

// sessionCookie is the login page's own browser session (single sign-on):
// while it lives the provider signs the user in without a password.
const sessionCookie = "testop_session"

// MustStart starts a provider on a free loopback port; it stops when the
// test ends.
func MustStart(tb testing.TB, cfg Config) *OP {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	o := &OP{Issuer: "http://" + ln.Addr().String()}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.IDTokenLifetime == 0 {
		cfg.IDTokenLifetime = time.Hour
	}
	c := &client{id: cfg.ClientID, secret: cfg.ClientSecret, redirectURIs: cfg.RedirectURIs,
		postLogoutRedirectURIs: cfg.PostLogoutRedirectURIs, idTokenLifetime: cfg.IDTokenLifetime}
	if o.storage, err = newStorage(c, cfg.Users, cfg.GroupsClaim); err != nil {
		tb.Fatal(err)
	}
	provider, err := op.NewProvider(&op.Config{
		CryptoKey:                sha256.Sum256([]byte(randomString())),
		CodeMethodS256:           true,
		DefaultLogoutRedirectURI: "/signed-out",
		SupportedUILocales:       []language.Tag{language.English},
	}, o.storage, op.StaticIssuer(o.Issuer), op.WithAllowInsecure())
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	callback := op.AuthCallbackURL(provider)
	mux.HandleFunc("GET /login", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("authRequestID")
		if c, err := r.Cookie(sessionCookie); err == nil && o.storage.completeWithSession(id, c.Value) {
			http.Redirect(w, r, callback(op.ContextWithIssuer(r.Context(), o.Issuer), id), http.StatusFound)
			return
		}
		loginPage(w, id, "")
	})
	mux.HandleFunc("POST /login", func(w http.ResponseWriter, r *http.Request) {
		id := r.PostFormValue("id")
		uid, err := o.storage.checkPassword(id, r.PostFormValue("username"), r.PostFormValue("password"))
		if err != nil {
			w.WriteHeader(http.StatusUnauthorized)
			loginPage(w, id, err.Error())
			return
		}
		sid := randomString()
		o.storage.mu.Lock()
		o.storage.sessions[sid] = uid
		o.storage.mu.Unlock()
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		http.Redirect(w, r, callback(op.ContextWithIssuer(r.Context(), o.Issuer), id), http.StatusFound)
	})
	mux.HandleFunc("GET /signed-out", func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("Signed out of the test provider."))
	})
	mux.Handle("POST /oauth/token", o.tokenEndpoint(provider))
	mux.Handle("/", provider)
	o.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go o.srv.Serve(ln)
	tb.Cleanup(func() { o.srv.Close() })
	return o
}

// tokenEndpoint serves the library's token endpoint, remembering each code
// it was asked for and letting a test tamper with the ID token it returns.
func (o *OP) tokenEndpoint(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err == nil {
			o.mu.Lock()
			o.codes = append(o.codes, r.PostForm.Get("code"))
			o.mu.Unlock()
		}
		o.mu.Lock()
		tamper := o.tamper
		o.mu.Unlock()
		if tamper == nil {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		var resp map[string]any
		if rec.Code == http.StatusOK && json.Unmarshal(body, &resp) == nil {
			if tok, ok := resp["id_token"].(string); ok {
				resp["id_token"] = tamper(tok)
				body, _ = json.Marshal(resp)
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		w.WriteHeader(rec.Code)
		w.Write(body)
	})
}

// TamperIDTokens makes the token endpoint pass every ID token it issues
// through f (nil stops it): a test's man in the middle.
func (o *OP) TamperIDTokens(f func(idToken string) string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.tamper = f
}

// Codes returns the authorization codes presented at the token endpoint,
// in order.
func (o *OP) Codes() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.codes...)
}

// EndedSessions returns the user IDs whose sessions were ended through
// end_session (RP-initiated logout), in order.
func (o *OP) EndedSessions() []string {
	o.storage.mu.Lock()
	defer o.storage.mu.Unlock()
	return append([]string(nil), o.storage.ended...)
}

var loginTemplate = template.Must(template.New("login").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Test provider sign-in</title></head>
<body style="font-family: sans-serif; max-width: 24rem; margin: 4rem auto">
<h1>Test OpenID Provider</h1>
{{if .Error}}<p role="alert" data-testid="op-error">{{.Error}}</p>{{end}}
<form method="post" action="/login">
<input type="hidden" name="id" value="{{.ID}}">
<p><label>User name <input name="username" data-testid="op-username" autocomplete="username"></label></p>
<p><label>Password <input name="password" type="password" data-testid="op-password" autocomplete="current-password"></label></p>
<p><button type="submit" data-testid="op-signin">Sign in</button></p>
</form></body></html>`))

func loginPage(w http.ResponseWriter, id, errMsg string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	loginTemplate.Execute(w, struct{ ID, Error string }{id, errMsg})
}

func randomString() string {
	b := make([]byte, 18)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
