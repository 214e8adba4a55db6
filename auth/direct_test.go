package auth_test

import (
	"context"
	"crypto/tls"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestDirectLoopback(t *testing.T) {
	for _, tc := range []struct {
		name, remote, host string
		header             []string
		want               string // "" for allowed, else a word of the refusal
	}{
		{"browser on this machine", "127.0.0.1:5000", "127.0.0.1:8080", nil, ""},
		{"localhost", "[::1]:5000", "localhost:8080", nil, ""},
		{"remote peer", "192.0.2.1:5000", "127.0.0.1:8080", nil, "192.0.2.1"},
		{"rebinding name", "127.0.0.1:5000", "rebind.attacker.example:8080", nil, "rebind.attacker.example"},
		{"tailscale serve", "127.0.0.1:5000", "127.0.0.1:8080", []string{"X-Forwarded-For", "100.64.0.1"}, "X-Forwarded-For"},
		{"Forwarded", "127.0.0.1:5000", "127.0.0.1:8080", []string{"Forwarded", "for=1.2.3.4"}, "Forwarded"},
		{"Via", "127.0.0.1:5000", "127.0.0.1:8080", []string{"Via", "1.1 nginx"}, "Via"},
		{"Tailscale header", "127.0.0.1:5000", "127.0.0.1:8080", []string{"Tailscale-Funnel-Request", "?1"}, "Tailscale-Funnel-Request"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := request(tc.remote, nil, tc.header...)
			r.Host = tc.host
			err := auth.DirectLoopback(r, "Signing in by name", "Sign in through your proxy.")
			if tc.want == "" && err != nil {
				t.Errorf("DirectLoopback = %v; want nil", err)
			}
			if tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("DirectLoopback = %v; want a refusal naming %s", err, tc.want)
			}
		})
	}
}

// TestSignOut_Revokes: a cookie copied before sign-out is no session
// after it, and an admin ending a user's sessions ends them all.
func TestSignOut_Revokes(t *testing.T) {
	db, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Unix(1_800_000_000, 0)
	a := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}, Revocations: db, Now: func() time.Time { now = now.Add(time.Millisecond); return now }})
	copied := signedInCookie(t, a, "alice")
	if _, ok := a.Identify(request("127.0.0.1:1", copied)); !ok {
		t.Fatal("fresh cookie: not signed in")
	}
	a.SignOut(httptest.NewRecorder(), request("127.0.0.1:1", copied))
	if id, ok := a.Identify(request("127.0.0.1:1", copied)); ok {
		t.Errorf("cookie copied before sign-out = %+v; want nobody", id)
	}
	again := signedInCookie(t, a, "alice")
	if _, ok := a.Identify(request("127.0.0.1:1", again)); !ok {
		t.Error("signing in again after sign-out: not signed in")
	}
	a.EndSessions(context.Background(), vdi.Identity{Login: "ops", Admin: true}, "alice")
	if _, ok := a.Identify(request("127.0.0.1:1", again)); ok {
		t.Error("after an admin ended alice's sessions she is still signed in")
	}
}

// TestCookie_HostPrefix: over HTTPS the session cookie is __Host- and
// Secure; the plain name is not read there.
func TestCookie_HostPrefix(t *testing.T) {
	a := mustNew(t, auth.Config{Modes: []string{auth.ModeDev}})
	r := request("127.0.0.1:1", nil)
	r.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	if err := a.SignIn(rec, r, "alice"); err != nil {
		t.Fatal(err)
	}
	c := rec.Result().Cookies()[0]
	if c.Name != "__Host-corral_vdi_session" || !c.Secure || c.Path != "/" || c.Domain != "" {
		t.Errorf("HTTPS cookie %s Secure=%v Path=%q Domain=%q; want __Host-corral_vdi_session, Secure, /, no domain", c.Name, c.Secure, c.Path, c.Domain)
	}
	plain := *c
	plain.Name = "corral_vdi_session"
	r2 := request("127.0.0.1:1", &plain)
	r2.TLS = &tls.ConnectionState{}
	if _, ok := a.Identify(r2); ok {
		t.Error("over HTTPS a cookie without the __Host- prefix was read")
	}
}

// BenchmarkIdentify_Revocations measures what checking sign-outs in
// SQLite adds to each cookie request.
func BenchmarkIdentify_Revocations(b *testing.B) {
	db, err := store.Open(context.Background(), filepath.Join(b.TempDir(), "portal.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.RevokeSessions(context.Background(), "alice", time.Now().Add(-time.Hour))
	for _, tc := range []struct {
		name string
		rev  auth.Revocations
	}{{"without", nil}, {"with", db}} {
		b.Run(tc.name, func(b *testing.B) {
			a := mustNew(b, auth.Config{Modes: []string{auth.ModeDev}, Revocations: tc.rev})
			c := signedInCookie(b, a, "alice")
			r := request("127.0.0.1:1", c)
			for b.Loop() {
				if _, ok := a.Identify(r); !ok {
					b.Fatal("not signed in")
				}
			}
		})
	}
}
