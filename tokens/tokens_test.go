package tokens

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// mustService returns a Service on a database of the test's own, with
// a clock the test moves.
func mustService(tb testing.TB) (*Service, *store.DB, *time.Time) {
	tb.Helper()
	db, err := store.Open(context.Background(), filepath.Join(tb.TempDir(), "portal.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := New(Config{Store: db, Now: func() time.Time { return now }})
	return s, db, &now
}

func TestService_Create(t *testing.T) {
	ctx := context.Background()
	alice := vdi.Identity{Login: "alice", Groups: []string{"qa"}}
	ops := vdi.Identity{Login: "ops", Admin: true}
	t.Run("OK", func(t *testing.T) {
		s, db, now := mustService(t)
		tok, err := s.Create(ctx, alice, api.TokenRequest{Name: "test-runner", Pools: []string{"local/demo", "local/demo"}, Expires: "720h"})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(tok.Token, Prefix) || tok.User != "alice" || len(tok.Pools) != 1 || !tok.Expires.Equal(now.Add(720*time.Hour)) {
			t.Fatalf("Create = %+v; want a token of alice for local/demo for 720h", tok)
		}
		kept, err := db.Token(ctx, tok.ID)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(kept.Hash, tok.Token) || kept.Hash != hash(tok.Token) || kept.Groups[0] != "qa" {
			t.Errorf("kept %+v; want the hash only, and alice's groups", kept)
		}
		got, ok, err := s.Verify(ctx, tok.Token)
		if err != nil || !ok || got.Login != "alice" || got.Name != "test-runner" {
			t.Errorf("Verify = %+v, %v, %v; want alice's test-runner", got, ok, err)
		}
		if list, _ := s.List(ctx, alice, false); len(list) != 1 || list[0].Token != "" || !list[0].LastUsed.Equal(*now) {
			t.Errorf("List = %+v; want the token without its secret, used now", list)
		}
	})
	t.Run("Scopes", func(t *testing.T) {
		s, _, _ := mustService(t)
		all, err := s.Create(ctx, alice, api.TokenRequest{Name: "all", Pools: []string{"*"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(all.Scopes, ","); got != "see,act,claim" {
			t.Errorf("a token made without scopes has %q; want see,act,claim", got)
		}
		see, err := s.Create(ctx, alice, api.TokenRequest{Name: "see", Pools: []string{"*"}, Scopes: []string{"claim", "see", "see"}})
		if err != nil {
			t.Fatal(err)
		}
		got, ok, err := s.Verify(ctx, see.Token)
		if err != nil || !ok || strings.Join(got.Scopes, ",") != "see,claim" {
			t.Errorf("Verify = %+v, %v, %v; want the scopes see,claim kept", got, ok, err)
		}
	})
	for _, c := range []struct {
		name string
		by   vdi.Identity
		req  api.TokenRequest
		code vdi.Code
	}{
		{"ErrNameInvalid", alice, api.TokenRequest{Name: "<b>", Pools: []string{"local/demo"}}, vdi.EInvalid},
		{"ErrScopeUnknown", alice, api.TokenRequest{Name: "a", Pools: []string{"*"}, Scopes: []string{"see", "admin"}}, vdi.EInvalid},
		{"ErrNoPools", alice, api.TokenRequest{Name: "a"}, vdi.EInvalid},
		{"ErrPoolInvalid", alice, api.TokenRequest{Name: "a", Pools: []string{"demo"}}, vdi.EInvalid},
		{"ErrExpiresTooLong", alice, api.TokenRequest{Name: "a", Pools: []string{"*"}, Expires: "100000h"}, vdi.EInvalid},
		{"ErrExpiresInvalid", alice, api.TokenRequest{Name: "a", Pools: []string{"*"}, Expires: "soon"}, vdi.EInvalid},
		{"ErrAdminByUser", alice, api.TokenRequest{Name: "a", Pools: []string{"*"}, Admin: true}, vdi.EForbidden},
		{"ErrOtherUserByUser", alice, api.TokenRequest{Name: "a", Pools: []string{"*"}, User: "bob"}, vdi.EForbidden},
		{"ErrByToken", vdi.Identity{Login: "alice", Token: &vdi.TokenScope{Name: "x", Pools: []string{"*"}}}, api.TokenRequest{Name: "a", Pools: []string{"*"}}, vdi.EForbidden},
		{"ErrCLIUser", vdi.Identity{Login: "cli:root", Admin: true}, api.TokenRequest{Name: "a", Pools: []string{"*"}}, vdi.EInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _, _ := mustService(t)
			s.validLogin = func(l string) bool { return !strings.Contains(l, ":") }
			if _, err := s.Create(ctx, c.by, c.req); vdi.ErrorCode(err) != c.code {
				t.Errorf("Create(%+v) = %v; want %s", c.req, err, c.code)
			}
		})
	}
	t.Run("ErrNameTaken", func(t *testing.T) {
		s, _, _ := mustService(t)
		req := api.TokenRequest{Name: "a", Pools: []string{"*"}}
		if _, err := s.Create(ctx, alice, req); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Create(ctx, alice, req); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("second Create = %v; want conflict", err)
		}
	})
	t.Run("AdminForServiceUser", func(t *testing.T) {
		s, _, _ := mustService(t)
		tok, err := s.Create(ctx, ops, api.TokenRequest{Name: "ci", Pools: []string{"*"}, User: "ci-bot", Admin: true})
		if err != nil || tok.User != "ci-bot" || !tok.Admin {
			t.Fatalf("Create = %+v, %v; want an admin token of ci-bot", tok, err)
		}
	})
}

func TestService_Verify(t *testing.T) {
	ctx := context.Background()
	alice := vdi.Identity{Login: "alice"}
	s, _, now := mustService(t)
	tok, err := s.Create(ctx, alice, api.TokenRequest{Name: "a", Pools: []string{"*"}, Expires: "1h"})
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"", "cvdi_", tok.Token + "x", strings.TrimPrefix(tok.Token, Prefix), strings.ToUpper(tok.Token)} {
		if _, ok, _ := s.Verify(ctx, bad); ok {
			t.Errorf("Verify(%q) = ok; want nobody", bad)
		}
	}
	*now = now.Add(time.Hour)
	if _, ok, _ := s.Verify(ctx, tok.Token); ok {
		t.Error("Verify of an expired token = ok")
	}
	*now = now.Add(-time.Minute)
	if _, ok, _ := s.Verify(ctx, tok.Token); !ok {
		t.Fatal("Verify of a live token failed")
	}
	if err := s.Revoke(ctx, vdi.Identity{Login: "bob"}, tok.ID); vdi.ErrorCode(err) != vdi.ENotFound {
		t.Errorf("bob's Revoke = %v; want not found", err)
	}
	if err := s.Revoke(ctx, alice, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.Verify(ctx, tok.Token); ok {
		t.Error("Verify of a revoked token = ok")
	}
}
