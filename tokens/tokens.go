// Package tokens keeps personal access tokens: a user (or an admin, for a
// service user) makes one for an agent or a script, limited to some pools,
// some actions (scopes: see, act, claim) and a lifetime; the portal keeps
// only its hash, shows it once, lists it with its last use and revokes it
// on request. Verify turns a presented
// token back into its record for the identity middleware (package auth).
package tokens

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Prefix starts every token, so that scanners and people recognise one.
const Prefix = "cvdi_"

// Lifetimes: the default and the longest a token may live.
const (
	DefaultLifetime = 720 * time.Hour
	MaxLifetime     = 366 * 24 * time.Hour
)

// MaxPerUser bounds one user's tokens.
const MaxPerUser = 50

// touchEvery is how often a token's last use is written at most.
const touchEvery = time.Minute

// Store keeps tokens (package store).
type Store interface {
	CreateToken(ctx context.Context, t vdi.Token) error
	TokenByHash(ctx context.Context, hash string) (vdi.Token, error)
	Token(ctx context.Context, id string) (vdi.Token, error)
	Tokens(ctx context.Context, login string) ([]vdi.Token, error)
	DeleteToken(ctx context.Context, id string) error
	TouchToken(ctx context.Context, id string, t time.Time) error
}

// Config configures a Service.
type Config struct {
	Store Store
	// Audit records every token made and revoked; nil records nothing.
	Audit vdi.AuditLog
	// ValidLogin checks a service user's login (auth.ValidLogin).
	ValidLogin func(string) bool
	Log        *slog.Logger
	// Now is the clock (time.Now).
	Now func() time.Time
}

// Service makes, lists, revokes and verifies tokens.
type Service struct {
	store      Store
	audit      vdi.AuditLog
	validLogin func(string) bool
	log        *slog.Logger
	now        func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // token id -> last use written
}

// New returns a Service.
func New(cfg Config) *Service {
	s := &Service{store: cfg.Store, audit: cfg.Audit, validLogin: cfg.ValidLogin, log: cfg.Log, now: cfg.Now, touched: map[string]time.Time{}}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.validLogin == nil {
		s.validLogin = func(l string) bool { return l != "" }
	}
	return s
}

var (
	validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	validPool = regexp.MustCompile(`^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?/[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$`)
)

// Create makes a token for by (or, for an admin, for req.User) and
// returns it with its secret, which is not kept.
func (s *Service) Create(ctx context.Context, by vdi.Identity, req api.TokenRequest) (api.Token, error) {
	if by.Token != nil {
		return api.Token{}, vdi.Errorf(vdi.EForbidden, "Make tokens on the Tokens page or with the CLI, signed in as yourself.", "A token cannot make tokens.")
	}
	t, err := s.check(ctx, by, req)
	if err != nil {
		return api.Token{}, err
	}
	secret, id := Prefix+random(32), random(9)
	t.ID, t.Hash, t.CreatedBy, t.Created = id, hash(secret), by.Login, s.now()
	if err := s.store.CreateToken(ctx, t); err != nil {
		return api.Token{}, err
	}
	detail := "token " + t.Name + " for " + strings.Join(t.Pools, ",") + " to " + strings.Join(t.Scopes, ",") + " until " + t.Expires.UTC().Format(time.RFC3339)
	if t.Admin {
		detail += "; admin"
	}
	s.record(ctx, vdi.AuditEvent{Actor: by.Login, Action: "token-create", Target: t.Login, Detail: detail})
	out := wire(t)
	out.Token = secret
	return out, nil
}

// check validates req for by and returns the token it asks for, without
// id, hash or creation.
func (s *Service) check(ctx context.Context, by vdi.Identity, req api.TokenRequest) (vdi.Token, error) {
	t := vdi.Token{Login: by.Login, Name: strings.TrimSpace(req.Name), Groups: by.Groups, Admin: req.Admin}
	if !validName.MatchString(t.Name) {
		return t, vdi.Errorf(vdi.EInvalid, "Use letters, digits and . _ - only, up to 64 characters, such as test-runner.", "Token name %q is not valid.", req.Name)
	}
	if req.User != "" && req.User != by.Login {
		if !by.Admin {
			return t, vdi.Errorf(vdi.EForbidden, "Leave user out to make a token of your own.", "Only admins make tokens for other users.")
		}
		if !s.validLogin(req.User) {
			return t, vdi.Errorf(vdi.EInvalid, "Use the user's login.", "%q is not a valid user name.", req.User)
		}
		t.Login, t.Groups = req.User, nil
	}
	if !s.validLogin(t.Login) {
		return t, vdi.Errorf(vdi.EInvalid, "Name the user the token acts as.", "%q has no tokens.", t.Login)
	}
	if t.Admin && !by.Admin {
		return t, vdi.Errorf(vdi.EForbidden, "Leave admin out: a token acts as you, without admin powers.", "Only admins make admin tokens.")
	}
	if len(req.Pools) == 0 {
		return t, vdi.Errorf(vdi.EInvalid, `Name the pools the token may use, such as ["local/demo"], or ["*"] for every pool you may use.`, "A token needs pools.")
	}
	for _, p := range req.Pools {
		if p != vdi.AllPools && !validPool.MatchString(p) {
			return t, vdi.Errorf(vdi.EInvalid, `Name pools as namespace/pool, such as local/demo, or "*".`, "Pool %q is not valid.", p)
		}
	}
	t.Pools = slices.Compact(slices.Sorted(slices.Values(req.Pools)))
	t.Scopes = slices.Clone(vdi.Scopes)
	if len(req.Scopes) > 0 {
		t.Scopes = nil
		for _, sc := range vdi.Scopes { // in the portal's order, each once
			if slices.Contains(req.Scopes, sc) {
				t.Scopes = append(t.Scopes, sc)
			}
		}
		for _, sc := range req.Scopes {
			if !slices.Contains(vdi.Scopes, sc) {
				return t, vdi.Errorf(vdi.EInvalid, `Name scopes from "see" (screenshots, waiting, the clipboard out), "act" (pointer, keys, the clipboard in) and "claim" (claim and release), or leave them out for all three.`,
					"Scope %q is not one the portal knows.", sc)
			}
		}
	}
	life := DefaultLifetime
	if req.Expires != "" {
		d, err := time.ParseDuration(req.Expires)
		if err != nil || d < time.Minute || d > MaxLifetime {
			return t, vdi.Errorf(vdi.EInvalid, "Use a Go duration from 1m to 8784h, such as 720h.", "Expiry %q is not valid.", req.Expires)
		}
		life = d
	}
	t.Expires = s.now().Add(life)
	mine, err := s.store.Tokens(ctx, t.Login)
	if err != nil {
		return t, unavailable(err)
	}
	if len(mine) >= MaxPerUser {
		return t, vdi.Errorf(vdi.EConflict, "Revoke tokens no longer used on the Tokens page.", "%s has %d tokens, the most one user may have.", t.Login, MaxPerUser)
	}
	if slices.ContainsFunc(mine, func(o vdi.Token) bool { return o.Name == t.Name }) {
		return t, vdi.Errorf(vdi.EConflict, "Pick another name, or revoke the old token first.", "%s has a token called %q already.", t.Login, t.Name)
	}
	return t, nil
}

// List returns by's tokens, or every user's for an admin asking for all.
func (s *Service) List(ctx context.Context, by vdi.Identity, all bool) ([]api.Token, error) {
	login := by.Login
	if all && by.Admin {
		login = ""
	}
	ts, err := s.store.Tokens(ctx, login)
	if err != nil {
		return nil, unavailable(err)
	}
	out := make([]api.Token, 0, len(ts))
	for _, t := range ts {
		out = append(out, wire(t))
	}
	return out, nil
}

// Revoke deletes a token of by's (any token, for an admin).
func (s *Service) Revoke(ctx context.Context, by vdi.Identity, id string) error {
	notFound := vdi.Errorf(vdi.ENotFound, "List your tokens with GET /api/vdi/tokens.", "No token %q of yours.", id)
	t, err := s.store.Token(ctx, id)
	if errors.Is(err, vdi.ErrNotFound) {
		return notFound
	} else if err != nil {
		return unavailable(err)
	}
	if t.Login != by.Login && !by.Admin {
		return notFound
	}
	if err := s.store.DeleteToken(ctx, id); errors.Is(err, vdi.ErrNotFound) {
		return notFound
	} else if err != nil {
		return unavailable(err)
	}
	s.record(ctx, vdi.AuditEvent{Actor: by.Login, Action: "token-revoke", Target: t.Login, Detail: "token " + t.Name})
	return nil
}

// Verify returns the live token secret names; false for a token that
// was never made, was revoked or has expired. An error is the store
// not answering.
func (s *Service) Verify(ctx context.Context, secret string) (vdi.Token, bool, error) {
	if !strings.HasPrefix(secret, Prefix) || len(secret) > 128 {
		return vdi.Token{}, false, nil
	}
	t, err := s.store.TokenByHash(ctx, hash(secret))
	if errors.Is(err, vdi.ErrNotFound) {
		return vdi.Token{}, false, nil
	} else if err != nil {
		return vdi.Token{}, false, err
	}
	now := s.now()
	if !now.Before(t.Expires) {
		return vdi.Token{}, false, nil
	}
	s.touch(ctx, t.ID, now)
	return t, true, nil
}

// touch writes a token's last use, once a minute at most.
func (s *Service) touch(ctx context.Context, id string, now time.Time) {
	s.mu.Lock()
	last, seen := s.touched[id]
	if seen && now.Sub(last) < touchEvery {
		s.mu.Unlock()
		return
	}
	if len(s.touched) > 4*MaxPerUser*64 {
		clear(s.touched)
	}
	s.touched[id] = now
	s.mu.Unlock()
	if err := s.store.TouchToken(ctx, id, now); err != nil {
		s.log.Warn("token last use not written", "token", id, "err", err)
	}
}

func (s *Service) record(ctx context.Context, e vdi.AuditEvent) {
	if s.audit == nil {
		return
	}
	if err := s.audit.Record(ctx, e); err != nil {
		s.log.Error("audit", "action", e.Action, "err", err)
	}
}

func wire(t vdi.Token) api.Token {
	return api.Token{ID: t.ID, Name: t.Name, User: t.Login, Pools: t.Pools, Scopes: t.Scopes, Admin: t.Admin, Created: t.Created, Expires: t.Expires, LastUsed: t.LastUsed}
}

func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

func random(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func unavailable(err error) error {
	return &vdi.Error{Code: vdi.EUnavailable, Err: err, Msg: "The token store did not answer.", Hint: "Try again in a moment; an admin should check the portal's logs."}
}
