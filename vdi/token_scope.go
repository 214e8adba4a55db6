package vdi

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// TokenScope is what a personal access token lets its bearer reach: the
// token's name, for the audit log and the dashboard, the pools ("ns/pool",
// or "*" for every pool its user may use) and the actions (Scopes) it is
// limited to.
type TokenScope struct {
	ID     string
	Name   string
	Pools  []string
	Scopes []string
}

// The actions a token may be limited to, as the agent seat names them:
// see a desktop, act in it, claim and release it.
const (
	// ScopeSee reads: screenshots, waiting for a change, the clipboard
	// and files out of a desktop, the pools and desktops' state.
	ScopeSee = "see"
	// ScopeAct works in a desktop: pointer, keys, the clipboard and files
	// into it.
	ScopeAct = "act"
	// ScopeClaim claims, starts, stops and releases desktops.
	ScopeClaim = "claim"
)

// Scopes are every action scope, in the order the portal lists them; a
// token made without naming any has them all.
var Scopes = []string{ScopeSee, ScopeAct, ScopeClaim}

// May fails unless id may take actions of scope: always without a token,
// else when the token names the scope. The refusal names what is missing.
func (id Identity) May(scope string) error {
	if id.Token == nil || slices.Contains(id.Token.Scopes, scope) {
		return nil
	}
	return &Error{Code: EForbidden,
		Msg:  fmt.Sprintf("Token %q lacks the %q scope (it has: %s).", id.Token.Name, scope, strings.Join(id.Token.Scopes, ", ")),
		Hint: fmt.Sprintf("Make a token with the %q scope on the Tokens page, or use one that has it.", scope)}
}

// AllPools is the scope entry that reaches every pool the user may use.
const AllPools = "*"

// Reaches reports whether id may reach pool ns/pool at all: always without
// a token, else when the token names the pool (or every pool).
func (id Identity) Reaches(ns, pool string) bool {
	if id.Token == nil {
		return true
	}
	return slices.Contains(id.Token.Pools, AllPools) || slices.Contains(id.Token.Pools, ns+"/"+pool)
}

// Agent returns the name an agent acting with id's token goes by,
// "bot:alice/test-runner"; empty for a person.
func (id Identity) Agent() string {
	if id.Token == nil {
		return ""
	}
	return "bot:" + id.Login + "/" + id.Token.Name
}

// outOfScope is the refusal for a token used on a pool it does not name.
func outOfScope(id Identity, ns, pool string) error {
	return Errorf(EForbidden, "Make a token that names this pool on the Tokens page, or use one that does.",
		"Token %q does not reach pool %s/%s.", id.Token.Name, ns, pool)
}

// checkScope fails when id's token does not reach the pool of member ref.
func (s *Service) checkScope(ctx context.Context, id Identity, ref Ref) error {
	if id.Token == nil {
		return nil
	}
	m, err := s.backend.Member(ctx, ref)
	if err != nil {
		return err
	}
	if !id.Reaches(ref.Namespace, m.Pool) {
		return outOfScope(id, ref.Namespace, m.Pool)
	}
	return nil
}

// Token is a personal access token as the portal keeps it: never the
// token itself, only its hash.
type Token struct {
	ID    string
	Login string
	Name  string
	Pools []string
	// Scopes are the actions the token may take (ScopeSee, ...).
	Scopes []string
	// Groups are the user's groups when the token was made (an identity
	// provider's groups are known only at sign-in).
	Groups []string
	// Admin is set only when an admin made the token an admin token.
	Admin     bool
	Hash      string
	CreatedBy string
	Created   time.Time
	Expires   time.Time
	// LastUsed is when the token was last presented (to a minute); zero
	// for never.
	LastUsed time.Time
}
