package auth_test

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
)

const key2 = "ZmVkY2JhOTg3NjU0MzIxMGZlZGNiYTk4NzY1NDMyMTA=" // another 32-byte key

var loopback = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}

func mustNew(tb testing.TB, cfg auth.Config) *auth.Authenticator {
	tb.Helper()
	if cfg.KeyFile == "" && len(cfg.SessionKeys) == 0 {
		cfg.KeyFile = filepath.Join(tb.TempDir(), "cookie.keys")
	}
	a, err := auth.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// signedInCookie signs login in by name with a and returns the cookie.
func signedInCookie(tb testing.TB, a *auth.Authenticator, login string) *http.Cookie {
	tb.Helper()
	rec := httptest.NewRecorder()
	if err := a.SignIn(rec, httptest.NewRequest("POST", "/signin", nil), login); err != nil {
		tb.Fatal(err)
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == "corral_vdi_session" {
			return c
		}
	}
	tb.Fatal("no session cookie set")
	return nil
}

func request(remote string, cookie *http.Cookie, header ...string) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = remote
	if cookie != nil {
		r.AddCookie(cookie)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func TestIdentify_TailscaleHeaders(t *testing.T) {
	var logs bytes.Buffer
	a := mustNew(t, auth.Config{Modes: []string{auth.ModeTailscale}, TrustedProxies: loopback, Admins: []string{"ops@example.com"},
		Log: slog.New(slog.NewTextHandler(&logs, nil))})
	for _, tc := range []struct {
		name, remote string
		wantLogin    string
	}{
		{"trusted IPv4", "127.0.0.1:5555", "ops@example.com"},
		{"trusted IPv6", "[::1]:5555", "ops@example.com"},
		{"IPv4-mapped trusted", "[::ffff:127.0.0.1]:5555", "ops@example.com"},
		{"untrusted", "192.0.2.7:5555", ""},
		{"untrusted again", "192.0.2.7:6666", ""},
		{"another untrusted", "198.51.100.9:5555", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, ok := a.Identify(request(tc.remote, nil, auth.HeaderTailscaleLogin, "ops@example.com", auth.HeaderTailscaleName, "Ops"))
			if id.Login != tc.wantLogin || ok != (tc.wantLogin != "") || (ok && (!id.Admin || id.Name != "Ops")) {
				t.Errorf("Identify from %s = %+v, %v; want login %q", tc.remote, id, ok, tc.wantLogin)
			}
		})
	}
	if n := strings.Count(logs.String(), "ignored Tailscale identity header"); n != 2 {
		t.Errorf("logged the spoofed header %d times; want once per untrusted address (2):\n%s", n, logs.String())
	}
	off := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, TrustedProxies: loopback})
	if id, ok := off.Identify(request("127.0.0.1:1", nil, auth.HeaderTailscaleLogin, "ops@example.com")); ok {
		t.Errorf("Tailscale header with tailscale mode off: %+v; want ignored", id)
	}
}

func TestIdentify_Cookies(t *testing.T) {
	keysOld, keysNew := keys(t, key1), keys(t, key2)
	dev := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, SessionKeys: keysOld})
	good := signedInCookie(t, dev, "alice")
	if id, ok := dev.Identify(request("192.0.2.1:1", good)); !ok || id.Login != "alice" {
		t.Fatalf("own cookie: %+v, %v; want alice", id, ok)
	}

	other := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, SessionKeys: keysNew})
	forged := signedInCookie(t, other, "mallory")
	flipped := *good
	b := []byte(flipped.Value)
	b[len(b)/2] ^= 0x04
	flipped.Value = string(b)
	for _, tc := range []struct {
		name   string
		cookie *http.Cookie
	}{
		{"signed with another key", forged},
		{"one bit changed", &flipped},
		{"unsigned", &http.Cookie{Name: "corral_vdi_session", Value: base64.URLEncoding.EncodeToString([]byte("login=admin"))}},
		{"empty", &http.Cookie{Name: "corral_vdi_session", Value: ""}},
	} {
		t.Run("Refuses/"+tc.name, func(t *testing.T) {
			if id, ok := dev.Identify(request("192.0.2.1:1", tc.cookie)); ok {
				t.Errorf("Identify = %+v; want no identity", id)
			}
		})
	}

	t.Run("KeyRotation", func(t *testing.T) {
		rotated := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, SessionKeys: append(append(auth.Keys{}, keysNew...), keysOld...)})
		if id, ok := rotated.Identify(request("192.0.2.1:1", good)); !ok || id.Login != "alice" {
			t.Errorf("cookie of the previous key after rotation: %+v, %v; want still accepted", id, ok)
		}
		fresh := signedInCookie(t, rotated, "bob")
		if _, ok := other.Identify(request("192.0.2.1:1", fresh)); !ok {
			t.Error("a new cookie after rotation does not verify with the new key alone; want it signed with the newest key")
		}
		dropped := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, SessionKeys: keysNew})
		if id, ok := dropped.Identify(request("192.0.2.1:1", good)); ok {
			t.Errorf("cookie of a dropped key: %+v; want refused", id)
		}
	})

	t.Run("ModeTurnedOff", func(t *testing.T) {
		tsOnly := mustNew(t, auth.Config{Modes: []string{auth.ModeTailscale}, SessionKeys: keysOld})
		if id, ok := tsOnly.Identify(request("192.0.2.1:1", good)); ok {
			t.Errorf("sign-in-by-name cookie after dev mode was turned off: %+v; want refused", id)
		}
		rec := httptest.NewRecorder()
		if err := tsOnly.SignIn(rec, httptest.NewRequest("POST", "/signin", nil), "eve"); err == nil {
			t.Error("SignIn with dev mode off succeeded; want refused")
		}
	})

	t.Run("Expires", func(t *testing.T) {
		now := time.Now()
		a := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, SessionKeys: keysOld, SessionLifetime: time.Minute, Now: func() time.Time { return now }})
		c := signedInCookie(t, a, "alice")
		now = now.Add(2 * time.Minute)
		if _, ok := a.Identify(request("192.0.2.1:1", c)); ok {
			t.Error("session past its lifetime accepted; want refused")
		}
	})

	t.Run("SignOutDeletes", func(t *testing.T) {
		rec := httptest.NewRecorder()
		dev.SignOut(rec, request("127.0.0.1:1", good))
		if c := rec.Result().Cookies(); len(c) != 1 || c[0].Name != "corral_vdi_session" || c[0].MaxAge >= 0 {
			t.Errorf("sign-out cookies %v; want the session cookie deleted", c)
		}
	})
}

func TestCookie_Secure(t *testing.T) {
	a := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, TrustedProxies: loopback, SessionKeys: keys(t, key1)})
	for _, tc := range []struct {
		name   string
		r      *http.Request
		secure bool
	}{
		{"plain HTTP", request("127.0.0.1:1", nil), false},
		{"TLS", func() *http.Request { r := request("192.0.2.1:1", nil); r.TLS = &tls.ConnectionState{}; return r }(), true},
		{"trusted TLS proxy", request("127.0.0.1:1", nil, "X-Forwarded-Proto", "https"), true},
		{"untrusted X-Forwarded-Proto", request("192.0.2.1:1", nil, "X-Forwarded-Proto", "https"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			if err := a.SignIn(rec, tc.r, "alice"); err != nil {
				t.Fatal(err)
			}
			c := rec.Result().Cookies()[0]
			if c.Secure != tc.secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
				t.Errorf("cookie Secure=%v HttpOnly=%v SameSite=%v; want Secure=%v, HttpOnly, Lax", c.Secure, c.HttpOnly, c.SameSite, tc.secure)
			}
		})
	}
}

func TestParseSessionKeys(t *testing.T) {
	for _, tc := range []struct {
		in      string
		n       int
		wantErr string
	}{
		{"", 0, ""},
		{key1, 1, ""},
		{key2 + "," + key1, 2, ""},
		{"# newest first\n" + key2 + "\n\n" + key1 + "\n", 2, ""},
		{strings.TrimRight(key1, "="), 1, ""},
		{"c2hvcnQ=", 0, "has 5 bytes"},
		{"not base64 at all!", 0, "not base64"},
	} {
		k, err := auth.ParseSessionKeys(tc.in)
		if len(k) != tc.n || (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("ParseSessionKeys(%q) = %d keys, %v; want %d keys, error %q", tc.in, len(k), err, tc.n, tc.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), strings.TrimSpace(tc.in)) {
			t.Errorf("error %q repeats the key", err)
		}
	}
}

func TestNew_Errors(t *testing.T) {
	good := auth.OIDCConfig{Issuer: "https://id.example.com", ClientID: "corral", ClientSecret: "hunter2-secret", RedirectURL: "https://vdi.example.com/auth/oidc/callback"}
	for _, tc := range []struct {
		name    string
		cfg     auth.Config
		wantErr string
	}{
		{"OIDC without session keys", auth.Config{Modes: []string{auth.ModeOIDC}, OIDC: good}, "CORRAL_VDI_SESSION_KEYS"},
		{"unknown mode", auth.Config{Modes: []string{"ldap"}}, "unknown identity mode"},
		{"http issuer", auth.Config{Modes: []string{auth.ModeOIDC}, SessionKeys: keys(t, key1),
			OIDC: auth.OIDCConfig{Issuer: "http://id.example.com", ClientID: "c", RedirectURL: good.RedirectURL}}, "CORRAL_VDI_OIDC_ISSUER"},
		{"no client ID", auth.Config{Modes: []string{auth.ModeOIDC}, SessionKeys: keys(t, key1),
			OIDC: auth.OIDCConfig{Issuer: good.Issuer, RedirectURL: good.RedirectURL}}, "CORRAL_VDI_OIDC_CLIENT_ID"},
		{"wrong callback path", auth.Config{Modes: []string{auth.ModeOIDC}, SessionKeys: keys(t, key1),
			OIDC: auth.OIDCConfig{Issuer: good.Issuer, ClientID: "c", RedirectURL: "https://vdi.example.com/callback"}}, "/auth/oidc/callback"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.New(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New = %v; want an error mentioning %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the client secret", err)
			}
		})
	}
}

func TestSecret_NeverFormatted(t *testing.T) {
	cfg := auth.Config{SessionKeys: keys(t, key1), OIDC: auth.OIDCConfig{ClientSecret: "hunter2-secret"}}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg, "keys", cfg.SessionKeys, "secret", cfg.OIDC.ClientSecret)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", cfg, "keys", cfg.SessionKeys, "secret", cfg.OIDC.ClientSecret)
	for _, s := range []string{fmt.Sprintf("%v", cfg), fmt.Sprintf("%+v", cfg), fmt.Sprintf("%#v", cfg), logs.String()} {
		if strings.Contains(s, "hunter2") || strings.Contains(s, "48 49 50") || strings.Contains(s, "48, 49, 50") ||
			strings.Contains(s, key1[:20]) || strings.Contains(s, "0123456789abcdef") {
			t.Errorf("formatted config shows a secret: %s", s)
		}
	}
	if got := cfg.OIDC.ClientSecret.Reveal(); got != "hunter2-secret" {
		t.Errorf("Reveal() = %q", got)
	}
}
