package vdi

import (
	"context"
	"slices"
	"time"
)

// TokenScope is what a personal access token lets its bearer reach: the
// token's name, for the audit log and the dashboard, and the pools
// ("ns/pool", or "*" for every pool its user may use) it is limited to.
type TokenScope struct {
	ID    string
	Name  string
	Pools []string
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
