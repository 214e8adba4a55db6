package vdi

import (
	"strings"
	"testing"
)

func TestIdentity_May(t *testing.T) {
	see := Identity{Login: "alice", Token: &TokenScope{Name: "watcher", Pools: []string{AllPools}, Scopes: []string{ScopeSee}}}
	for _, c := range []struct {
		name  string
		id    Identity
		scope string
		ok    bool
	}{
		{"Person", Identity{Login: "alice"}, ScopeAct, true},
		{"Scoped", see, ScopeSee, true},
		{"ErrActWithSee", see, ScopeAct, false},
		{"ErrClaimWithSee", see, ScopeClaim, false},
		{"ErrNoScopes", Identity{Login: "alice", Token: &TokenScope{Name: "none"}}, ScopeSee, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.id.May(c.scope)
			if (err == nil) != c.ok {
				t.Fatalf("May(%q) = %v; want ok %v", c.scope, err, c.ok)
			}
			if err != nil && (ErrorCode(err) != EForbidden || !strings.Contains(err.Error(), `"`+c.scope+`" scope`)) {
				t.Errorf("May(%q) = %v (%s); want forbidden, naming the scope", c.scope, err, ErrorCode(err))
			}
		})
	}
}
