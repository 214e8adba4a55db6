package auth

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorilla/sessions"
)

// MinKeyBytes is the least entropy a session key may carry.
const MinKeyBytes = 32

// Secret is a string that never shows in logs or formatted output.
type Secret string

// String hides the secret from fmt's %v and %s.
func (s Secret) String() string {
	if s == "" {
		return ""
	}
	return "[redacted]"
}

// GoString hides the secret from fmt's %#v.
func (s Secret) GoString() string { return s.String() }

// MarshalJSON hides the secret from JSON (and so from JSON logs).
func (s Secret) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

// LogValue hides the secret from slog.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.String()) }

// Reveal returns the secret itself, for the one place that sends it.
func (s Secret) Reveal() string { return string(s) }

// Keys are session keys, newest first; they never show in formatted output.
type Keys [][]byte

// String hides the keys from fmt.
func (k Keys) String() string { return fmt.Sprintf("[%d keys redacted]", len(k)) }

// GoString hides the keys from fmt's %#v.
func (k Keys) GoString() string { return k.String() }

// MarshalJSON hides the keys from JSON (and so from JSON logs).
func (k Keys) MarshalJSON() ([]byte, error) { return json.Marshal(k.String()) }

// LogValue hides the keys from slog.
func (k Keys) LogValue() slog.Value { return slog.StringValue(k.String()) }

// ParseSessionKeys parses session keys separated by commas or newlines,
// newest first: the first signs new cookies, all of them are accepted, so
// a key is rotated by putting a new one in front and dropping the oldest
// once its cookies have expired. Each key is base64 (standard or URL,
// padded or not) of at least MinKeyBytes random bytes; lines starting
// with # are comments.
func ParseSessionKeys(s string) (Keys, error) {
	var keys Keys
	for _, line := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '\n' || r == '\r' }) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var key []byte
		var err error
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
			if key, err = enc.DecodeString(line); err == nil {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("session key %d is not base64: make one with `openssl rand -base64 32`", len(keys)+1)
		}
		if len(key) < MinKeyBytes {
			return nil, fmt.Errorf("session key %d has %d bytes, want at least %d: make one with `openssl rand -base64 32`", len(keys)+1, len(key), MinKeyBytes)
		}
		keys = append(keys, key)
	}
	return keys, nil
}

// keyPairs derives a signing (HMAC-SHA256) and an encryption (AES-256) key
// from each session key, in gorilla/sessions' order: newest pair first.
func keyPairs(keys Keys) ([][]byte, error) {
	var pairs [][]byte
	for _, k := range keys {
		hash, err := hkdf.Key(sha256.New, k, nil, "corral-vdi session cookie signing", 64)
		if err != nil {
			return nil, err
		}
		block, err := hkdf.Key(sha256.New, k, nil, "corral-vdi session cookie encryption", 32)
		if err != nil {
			return nil, err
		}
		pairs = append(pairs, hash, block)
	}
	return pairs, nil
}

// loadKeyFile reads the embedded default's key file, creating it with a
// random key (mode 0600) the first time. Files of the older 96-byte format
// are used as they are.
func loadKeyFile(path string) ([][]byte, error) {
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

// Cookie names. The flow cookie lives only between the redirect to the
// provider and its answer.
const (
	cookieName     = "corral_vdi_session"
	hostCookieName = "__Host-" + cookieName // over HTTPS: bound to this host, Path=/, Secure
	flowCookieName = "corral_vdi_oidc"
	flowCookiePath = "/auth/oidc/"
	flowLifetime   = 10 * time.Minute
)

// Session values.
const (
	keyLogin   = "login"
	keyName    = "name"
	keyGroups  = "groups"
	keyVia     = "via"     // the mode that signed the user in; only honoured while it is on
	keyExpires = "exp"     // unix seconds; checked on every request
	keyIDToken = "idtoken" // the raw ID token, as id_token_hint at sign-out
	keyIssued  = "iat"     // unix nanoseconds; a sign-out revokes every cookie issued before it
)

// secure reports whether cookies for r must be marked Secure: always when
// configured, when r came over TLS, or when a trusted proxy says it did.
func (a *Authenticator) secure(r *http.Request) bool {
	return a.alwaysSecure || r.TLS != nil || (a.trusted(r) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https"))
}

// newSession returns an empty session named name with the options for r.
func (a *Authenticator) newSession(r *http.Request, name string, maxAge time.Duration, path string) *sessions.Session {
	s := sessions.NewSession(a.cookies, name)
	s.IsNew = true
	s.Options = &sessions.Options{
		Path: path, MaxAge: int(maxAge / time.Second), HttpOnly: true,
		Secure: a.secure(r), SameSite: http.SameSiteLaxMode,
	}
	return s
}

// session returns the valid signed session of r, or nil: a forged,
// unsigned, expired or signed-out session, or one made by a mode now off,
// is no session.
func (a *Authenticator) session(r *http.Request) *sessions.Session {
	s := a.signedSession(r)
	if s == nil {
		return nil
	}
	login, _ := s.Values[keyLogin].(string)
	if a.revocations != nil {
		issued, _ := s.Values[keyIssued].(int64)
		before, err := a.revocations.SessionsRevokedBefore(r.Context(), login)
		if err != nil { // fail closed: a sign-out must hold
			a.log.Error("read sign-outs", "login", login, "err", err)
			return nil
		}
		if !before.IsZero() && issued < before.UnixNano() {
			return nil
		}
	}
	return s
}

// signedSession is session without the sign-out check: what SignOut
// needs, since a sign-out must be recorded even while the sign-out record
// cannot be read.
func (a *Authenticator) signedSession(r *http.Request) *sessions.Session {
	s, err := a.cookies.Get(r, a.sessionCookie(r))
	if err != nil || s.IsNew {
		return nil
	}
	login, _ := s.Values[keyLogin].(string)
	via, _ := s.Values[keyVia].(string)
	exp, _ := s.Values[keyExpires].(int64)
	if login == "" || !a.modes[via] || a.now().Unix() >= exp {
		return nil
	}
	return s
}

// sessionCookie is the session cookie's name for r: with the __Host-
// prefix over HTTPS, so that no other host (a sibling subdomain) can set
// or shadow it.
func (a *Authenticator) sessionCookie(r *http.Request) string {
	if a.secure(r) {
		return hostCookieName
	}
	return cookieName
}

// deleteCookie tells the browser to drop a cookie.
func (a *Authenticator) deleteCookie(w http.ResponseWriter, r *http.Request, name, path string) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1, HttpOnly: true,
		Secure: a.secure(r), SameSite: http.SameSiteLaxMode})
}
