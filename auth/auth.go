// Package auth tells who is asking: Tailscale identity headers from trusted
// proxies, an OpenID Connect sign-in (authorization code + PKCE, state and
// nonce), or the sign-in-by-name page of the embedded default; the last two
// keep the user in a signed, encrypted session cookie. It hands handlers
// one vdi.Identity.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/sessions"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Identity modes.
const (
	ModeTailscale = "tailscale"
	ModeOIDC      = "oidc"
	ModeDev       = "dev"
)

// Tailscale identity headers, as `tailscale serve` sets them.
const (
	HeaderTailscaleLogin = "Tailscale-User-Login"
	HeaderTailscaleName  = "Tailscale-User-Name"
)

// DefaultSessionLifetime is how long a cookie session lasts.
const DefaultSessionLifetime = 12 * time.Hour

// Config configures an Authenticator.
type Config struct {
	// Modes enables identity sources: ModeTailscale, ModeOIDC, ModeDev.
	Modes []string
	// TrustedProxies are where Tailscale headers (and X-Forwarded-Proto)
	// are believed.
	TrustedProxies []netip.Prefix
	// Admins are the logins with admin rights; "group:NAME" names a
	// group whose members are admins.
	Admins []string
	// AdminGroups are the OIDC groups whose members are admins.
	AdminGroups []string
	// SessionKeys sign and encrypt the session cookie, newest first (see
	// ParseSessionKeys). Required with ModeOIDC; without them the keys
	// come from KeyFile.
	SessionKeys Keys
	// KeyFile holds the embedded default's cookie keys; created if absent.
	KeyFile string
	// SessionLifetime is how long a sign-in lasts (DefaultSessionLifetime).
	SessionLifetime time.Duration
	// Secure marks every cookie Secure; it is also set per request when
	// the request came over TLS or through a trusted TLS proxy.
	Secure bool
	// OIDC configures ModeOIDC.
	OIDC OIDCConfig
	// Groups adds the groups file's groups to every identity; nil for none.
	Groups vdi.GroupDirectory
	// Audit, if set, records every sign-in.
	Audit vdi.AuditLog
	// Revocations, if set, keeps sign-outs: a cookie issued before its
	// user's last sign-out (or an admin ending their sessions) is no
	// longer a session, on any replica sharing the database.
	Revocations Revocations
	// Tokens, if set, lets personal access tokens in an Authorization
	// header identify their users.
	Tokens Tokens
	Log    *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Authenticator identifies requests.
type Authenticator struct {
	modes        map[string]bool
	proxies      []netip.Prefix
	admins       map[string]bool
	adminGroups  map[string]bool
	groups       vdi.GroupDirectory
	cookies      *sessions.CookieStore
	lifetime     time.Duration
	alwaysSecure bool
	oidc         *oidcFlow
	audit        vdi.AuditLog
	revocations  Revocations
	tokens       Tokens
	log          *slog.Logger
	now          func() time.Time

	warnMu sync.Mutex
	warned map[string]bool // remote addresses already warned about spoofed headers
}

// maxWarned bounds the addresses remembered for spoofing warnings, so a
// scan from many addresses cannot grow memory without end.
const maxWarned = 1024

// New returns an Authenticator. With ModeOIDC it checks the provider
// settings but does not contact the provider yet.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{
		modes: map[string]bool{}, proxies: cfg.TrustedProxies, admins: map[string]bool{}, adminGroups: map[string]bool{},
		lifetime: cfg.SessionLifetime, alwaysSecure: cfg.Secure, audit: cfg.Audit, revocations: cfg.Revocations, log: cfg.Log, now: cfg.Now,
		groups: cfg.Groups, tokens: cfg.Tokens,
	}
	if a.log == nil {
		a.log = slog.Default()
	}
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.Revocations != nil {
		a.revocations = newRevocationCache(cfg.Revocations, a.now)
	}
	if a.lifetime <= 0 {
		a.lifetime = DefaultSessionLifetime
	}
	for _, m := range cfg.Modes {
		switch m {
		case ModeTailscale, ModeOIDC, ModeDev:
			a.modes[m] = true
		default:
			return nil, fmt.Errorf("auth: unknown identity mode %q (want %s, %s or %s)", m, ModeTailscale, ModeOIDC, ModeDev)
		}
	}
	for _, l := range cfg.Admins {
		if g, ok := strings.CutPrefix(l, "group:"); ok {
			a.adminGroups[g] = true
		} else {
			a.admins[l] = true
		}
	}
	for _, g := range cfg.AdminGroups {
		a.adminGroups[g] = true
	}
	var pairs [][]byte
	var err error
	switch {
	case len(cfg.SessionKeys) > 0:
		pairs, err = keyPairs(cfg.SessionKeys)
	case a.modes[ModeOIDC]:
		return nil, errors.New("auth: OIDC sign-in needs session keys shared by every replica: set CORRAL_VDI_SESSION_KEYS (or _FILE) to the output of `openssl rand -base64 32`")
	default:
		pairs, err = loadKeyFile(cfg.KeyFile)
	}
	if err != nil {
		return nil, err
	}
	a.cookies = sessions.NewCookieStore(pairs...)
	a.cookies.MaxAge(int(max(a.lifetime, flowLifetime) / time.Second))
	if a.modes[ModeOIDC] {
		if a.oidc, err = newOIDCFlow(cfg.OIDC, a.log); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// DevSignIn reports whether the sign-in-by-name page is enabled.
func (a *Authenticator) DevSignIn() bool { return a.modes[ModeDev] }

// Identify returns who made r, and false when nobody is signed in.
func (a *Authenticator) Identify(r *http.Request) (vdi.Identity, bool) {
	if id, ok := r.Context().Value(trustedKey{}).(vdi.Identity); ok {
		return id, true
	}
	id, ok := a.identifyRequest(r)
	if ok && (IsCLILogin(id.Login) || !ValidLogin(id.Login)) {
		return vdi.Identity{}, false // only the admin socket names CLI users
	}
	return id, ok
}

// identifyRequest returns who a header or cookie of r names.
func (a *Authenticator) identifyRequest(r *http.Request) (vdi.Identity, bool) {
	if secret, ok := bearer(r); ok {
		return a.tokenIdentity(r, secret)
	}
	if login := r.Header.Get(HeaderTailscaleLogin); login != "" && a.modes[ModeTailscale] {
		if a.trusted(r) {
			return a.identity(login, r.Header.Get(HeaderTailscaleName), nil), true
		}
		a.warnSpoofed(remoteIP(r))
	}
	s := a.session(r)
	if s == nil {
		return vdi.Identity{}, false
	}
	login, _ := s.Values[keyLogin].(string)
	name, _ := s.Values[keyName].(string)
	groups, _ := s.Values[keyGroups].([]string)
	return a.identity(login, name, groups), true
}

// warnSpoofed logs an ignored Tailscale header once per address.
func (a *Authenticator) warnSpoofed(ip string) {
	a.warnMu.Lock()
	defer a.warnMu.Unlock()
	if a.warned[ip] || len(a.warned) > maxWarned {
		return
	}
	if a.warned == nil {
		a.warned = map[string]bool{}
	}
	a.warned[ip] = true
	if len(a.warned) > maxWarned {
		a.log.Warn("ignored Tailscale identity headers from many untrusted addresses; not logging further ones")
		return
	}
	a.log.Warn("ignored Tailscale identity header from an untrusted address; set CORRAL_VDI_TRUSTED_PROXIES if this is your proxy", "remote", ip)
}

func (a *Authenticator) identity(login, name string, groups []string) vdi.Identity {
	if name == "" {
		name = login
	}
	if a.groups != nil {
		groups = slices.Clone(groups) // the session's own slice stays as it is
		for _, g := range a.groups.GroupsOf(login) {
			if !slices.Contains(groups, g) {
				groups = append(groups, g)
			}
		}
	}
	admin := a.admins[login]
	for _, g := range groups {
		admin = admin || a.adminGroups[g]
	}
	return vdi.Identity{Login: login, Name: name, Groups: groups, Admin: admin}
}

// trusted reports whether r came through a trusted proxy: never from a
// desktop (or a local connection whose owner is unknown), always from a
// checked Unix-socket peer, else by the peer's address.
func (a *Authenticator) trusted(r *http.Request) bool {
	if FromDesktop(r.Context()) {
		return false
	}
	if ProxyPeer(r.Context()) {
		return true
	}
	ip, err := netip.ParseAddr(remoteIP(r))
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.proxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

var validLogin = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$`)

// ValidLogin reports whether login is acceptable as a user name.
func ValidLogin(login string) bool { return validLogin.MatchString(login) }

// SignIn starts a cookie session for login (the sign-in-by-name page).
// The caller decides whether r may sign in by name at all: only when
// DirectLoopback(r) is nil and the portal listens on loopback.
func (a *Authenticator) SignIn(w http.ResponseWriter, r *http.Request, login string) error {
	if !a.modes[ModeDev] {
		return vdi.Errorf(vdi.EForbidden, "Sign in through your identity provider.", "Signing in by name is off.")
	}
	if FromDesktop(r.Context()) {
		return vdi.Errorf(vdi.EForbidden, "Sign in from your own browser, not from inside a desktop.", "Signing in by name is not offered inside a desktop.")
	}
	login = strings.TrimSpace(login)
	if !ValidLogin(login) {
		return vdi.Errorf(vdi.EInvalid, "Use letters, digits and . _ @ + - only, up to 100 characters.", "%q is not a valid user name.", login)
	}
	return a.startSession(w, r, ModeDev, login, "", nil, "")
}

// startSession saves a new session cookie for a signed-in user.
func (a *Authenticator) startSession(w http.ResponseWriter, r *http.Request, via, login, name string, groups []string, idToken string) error {
	s := a.newSession(r, a.sessionCookie(r), a.lifetime, "/")
	s.Values[keyLogin], s.Values[keyVia], s.Values[keyExpires] = login, via, a.now().Add(a.lifetime).Unix()
	s.Values[keyIssued] = a.now().UnixNano()
	if name != "" {
		s.Values[keyName] = name
	}
	if len(groups) > 0 {
		s.Values[keyGroups] = groups
	}
	if idToken != "" {
		s.Values[keyIDToken] = idToken
	}
	err := a.cookies.Save(r, w, s)
	if err != nil && idToken != "" {
		// The ID token only serves as a logout hint: drop it rather than
		// fail when the cookie would be too large.
		delete(s.Values, keyIDToken)
		err = a.cookies.Save(r, w, s)
	}
	if err != nil && len(groups) > 0 {
		// Providers may list hundreds of groups: keep the admin groups only.
		var kept []string
		for _, g := range groups {
			if a.adminGroups[g] {
				kept = append(kept, g)
			}
		}
		s.Values[keyGroups] = kept
		a.log.Warn("session cookie too large; kept only the admin groups", "login", login, "groups", len(groups), "kept", len(kept))
		err = a.cookies.Save(r, w, s)
	}
	if err != nil {
		return fmt.Errorf("auth: save session: %w", err)
	}
	if a.audit != nil {
		if err := a.audit.Record(r.Context(), vdi.AuditEvent{Actor: login, Action: "sign-in", Detail: "via " + via}); err != nil {
			a.log.Error("audit sign-in", "login", login, "err", err)
		}
	}
	return nil
}

// SignOut ends the cookie session, and with Revocations every cookie of
// the user issued so far, so that a copy taken before is worth nothing.
// A cookie known to be signed out already signs nobody out (a stolen old
// copy must not end the user's new sessions); one whose sign-out record
// cannot be read (the database does not answer) is signed out, so that
// the sign-out is kept and written once it answers.
func (a *Authenticator) SignOut(w http.ResponseWriter, r *http.Request) error {
	s := a.signedSession(r)
	a.deleteCookie(w, r, a.sessionCookie(r), "/")
	if s == nil {
		return nil
	}
	login, _ := s.Values[keyLogin].(string)
	if a.revocations != nil {
		issued, _ := s.Values[keyIssued].(int64)
		if before, err := a.revocations.SessionsRevokedBefore(r.Context(), login); err == nil && !before.IsZero() && issued < before.UnixNano() {
			return nil
		}
	}
	var revokeErr error
	if a.revocations != nil {
		if err := a.revocations.RevokeSessions(r.Context(), login, a.now()); err != nil {
			a.log.Error("sign-out not written yet", "login", login, "err", err)
			revokeErr = &vdi.Error{Code: vdi.EUnavailable, Err: err,
				Msg: "You are signed out in this browser, but the portal could not save your sign-out yet: its database does not answer. " +
					"It keeps trying; until it succeeds, a copy of your session elsewhere may still work on other portal servers.",
				Hint: "Sign out again in a few minutes to be sure, or ask an admin to end your sessions."}
		}
	}
	if a.audit != nil {
		if err := a.audit.Record(r.Context(), vdi.AuditEvent{Actor: login, Action: "sign-out"}); err != nil {
			a.log.Error("audit sign-out", "login", login, "err", err)
		}
	}
	return revokeErr
}

// EndSessions ends every cookie session of login issued so far: admin by
// signs the user out everywhere. It needs Revocations.
func (a *Authenticator) EndSessions(ctx context.Context, by vdi.Identity, login string) error {
	if a.revocations == nil {
		return vdi.Errorf(vdi.EUnavailable, "This portal keeps no sign-outs.", "Ending sessions is not available.")
	}
	revokeErr := a.revocations.RevokeSessions(ctx, login, a.now())
	if revokeErr != nil {
		a.log.Error("end-sessions not written yet", "login", login, "err", revokeErr)
		revokeErr = &vdi.Error{Code: vdi.EUnavailable, Err: revokeErr,
			Msg:  fmt.Sprintf("%s is signed out on this portal server only: the portal could not save it yet, as its database does not answer. It keeps trying until it is written; other servers honour it then.", login),
			Hint: "Check /readyz and end the sessions again once the database answers, to be sure."}
	}
	if a.audit != nil {
		if err := a.audit.Record(ctx, vdi.AuditEvent{Actor: by.Login, Action: "end-sessions", Target: login}); err != nil {
			a.log.Error("audit end-sessions", "login", login, "err", err)
		}
	}
	return revokeErr
}

// SignedOutSince reports whether login signed out, or an admin ended
// their sessions, after t: a USB token minted or a stream opened at t is
// then over. A sign-out record that cannot be read counts as one (fail
// closed).
func (a *Authenticator) SignedOutSince(ctx context.Context, login string, t time.Time) bool {
	if a.revocations == nil {
		return false
	}
	before, err := a.revocations.SessionsRevokedBefore(ctx, login)
	if err != nil {
		a.log.Error("read sign-outs", "login", login, "err", err)
		return true
	}
	return before.After(t)
}

// ParsePrefixes parses comma-separated CIDR prefixes; bare addresses are
// taken as single hosts.
func ParsePrefixes(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if !strings.Contains(s, "/") {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
			}
			out = append(out, netip.PrefixFrom(ip, ip.BitLen()))
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}
