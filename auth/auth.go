// Package auth tells who is asking: Tailscale identity headers from trusted
// proxies, or the portal's own signed session cookie (set by the loopback
// sign-in-by-name page of the embedded default). It hands handlers one
// vdi.Identity.
package auth

import (
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/gorilla/sessions"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Identity modes.
const (
	ModeTailscale = "tailscale"
	ModeDev       = "dev"
)

// Tailscale identity headers, as `tailscale serve` sets them.
const (
	HeaderTailscaleLogin = "Tailscale-User-Login"
	HeaderTailscaleName  = "Tailscale-User-Name"
)

const (
	cookieName = "corral_vdi_session"
	keyLogin   = "login"
)

// Config configures an Authenticator.
type Config struct {
	// Modes enables identity sources: ModeTailscale, ModeDev.
	Modes []string
	// TrustedProxies are where Tailscale headers are believed.
	TrustedProxies []netip.Prefix
	// Admins are the logins with admin rights.
	Admins []string
	// KeyFile holds the cookie signing keys; created with fresh keys if absent.
	KeyFile string
	// Secure marks cookies Secure (the portal is served over HTTPS).
	Secure bool
	Log    *slog.Logger
}

// Authenticator identifies requests.
type Authenticator struct {
	modes   map[string]bool
	proxies []netip.Prefix
	admins  map[string]bool
	cookies *sessions.CookieStore
	log     *slog.Logger

	warnOnce sync.Map // remote addresses already warned about spoofed headers
}

// New returns an Authenticator, loading or creating its cookie keys.
func New(cfg Config) (*Authenticator, error) {
	a := &Authenticator{modes: map[string]bool{}, proxies: cfg.TrustedProxies, admins: map[string]bool{}, log: cfg.Log}
	if a.log == nil {
		a.log = slog.Default()
	}
	for _, m := range cfg.Modes {
		switch m {
		case ModeTailscale, ModeDev:
			a.modes[m] = true
		default:
			return nil, fmt.Errorf("auth: unknown identity mode %q (want %s or %s)", m, ModeTailscale, ModeDev)
		}
	}
	for _, l := range cfg.Admins {
		a.admins[l] = true
	}
	keys, err := loadKeys(cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	a.cookies = sessions.NewCookieStore(keys...)
	a.cookies.Options = &sessions.Options{Path: "/", MaxAge: 7 * 24 * 3600, HttpOnly: true, Secure: cfg.Secure, SameSite: http.SameSiteLaxMode}
	return a, nil
}

// loadKeys reads a 64-byte hash key and a 32-byte encryption key from path,
// creating the file with random keys (mode 0600) the first time.
func loadKeys(path string) ([][]byte, error) {
	buf, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		buf = make([]byte, 96)
		rand.Read(buf)
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("auth: cookie keys: %w", err)
		}
		if err := os.WriteFile(path, buf, 0o600); err != nil {
			return nil, fmt.Errorf("auth: cookie keys: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("auth: cookie keys: %w", err)
	}
	if len(buf) != 96 {
		return nil, fmt.Errorf("auth: cookie key file %s is %d bytes, want 96: delete it to make new keys", path, len(buf))
	}
	return [][]byte{buf[:64], buf[64:]}, nil
}

// DevSignIn reports whether the sign-in-by-name page is enabled.
func (a *Authenticator) DevSignIn() bool { return a.modes[ModeDev] }

// Identify returns who made r, and false when nobody is signed in.
func (a *Authenticator) Identify(r *http.Request) (vdi.Identity, bool) {
	if login := r.Header.Get(HeaderTailscaleLogin); login != "" && a.modes[ModeTailscale] {
		if a.trusted(r) {
			return a.identity(login, r.Header.Get(HeaderTailscaleName)), true
		}
		if _, seen := a.warnOnce.LoadOrStore(remoteIP(r), true); !seen {
			a.log.Warn("ignored Tailscale identity header from an untrusted address", "remote", remoteIP(r))
		}
	}
	s, _ := a.cookies.Get(r, cookieName) // a forged or stale cookie yields an empty session
	if login, ok := s.Values[keyLogin].(string); ok && login != "" {
		return a.identity(login, ""), true
	}
	return vdi.Identity{}, false
}

func (a *Authenticator) identity(login, name string) vdi.Identity {
	if name == "" {
		name = login
	}
	return vdi.Identity{Login: login, Name: name, Admin: a.admins[login]}
}

func (a *Authenticator) trusted(r *http.Request) bool {
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

// SignIn starts a cookie session for login.
func (a *Authenticator) SignIn(w http.ResponseWriter, r *http.Request, login string) error {
	login = strings.TrimSpace(login)
	if !ValidLogin(login) {
		return vdi.Errorf(vdi.EInvalid, "Use letters, digits and . _ @ + - only, up to 100 characters.", "%q is not a valid user name.", login)
	}
	s, _ := a.cookies.New(r, cookieName)
	s.Values[keyLogin] = login
	return s.Save(r, w)
}

// SignOut ends the cookie session.
func (a *Authenticator) SignOut(w http.ResponseWriter, r *http.Request) error {
	s, _ := a.cookies.New(r, cookieName)
	s.Options.MaxAge = -1
	return s.Save(r, w)
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
