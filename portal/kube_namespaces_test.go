package portal

import (
	"context"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestParsePoolNamespaces: a list of namespace names, each once; a name
// that cannot be a namespace is refused with an example.
func TestParsePoolNamespaces(t *testing.T) {
	got, err := parsePoolNamespaces(" team-a, team-b,team-a,")
	if err != nil || strings.Join(got, ",") != "team-a,team-b" {
		t.Fatalf("parsePoolNamespaces = %v, %v; want team-a,team-b", got, err)
	}
	if got, err := parsePoolNamespaces(""); err != nil || got != nil {
		t.Fatalf("empty: %v, %v; want the cluster-wide mode", got, err)
	}
	if _, err := parsePoolNamespaces("team-a,Team_B"); err == nil || !strings.Contains(err.Error(), `"Team_B" is not a namespace name`) {
		t.Fatalf("Team_B: %v; want it refused by name", err)
	}
}

// TestNamespacedRouting: a namespace the portal was not given is refused
// in one line before any backend or Lease store is asked.
func TestNamespacedRouting(t *testing.T) {
	ctx := context.Background()
	b := &namespacedBackend{names: []string{"a", "b"}, by: map[string]namespaceBackend{}}
	l := &namespacedLeases{names: []string{"a", "b"}, by: map[string]vdi.Leases{}, lockNS: "corral-vdi"}
	for name, err := range map[string]error{
		"Pool":       func() error { _, err := b.Pool(ctx, "c", "p"); return err }(),
		"Member":     func() error { _, err := b.Member(ctx, vdi.Ref{Namespace: "c", Name: "m"}); return err }(),
		"CreatePool": b.CreatePool(ctx, vdi.Pool{Namespace: "c", Name: "p"}),
		"Start":      b.Start(ctx, vdi.Ref{Namespace: "c", Name: "m"}),
		"LeaseGet":   func() error { _, err := l.Get(ctx, vdi.Ref{Namespace: "c", Name: "m"}); return err }(),
		"LeaseList":  func() error { _, err := l.List(ctx, "c", ""); return err }(),
		// No lock store: the portal's namespace is no pool namespace either.
		"LockWithoutStore": func() error { _, err := l.Create(ctx, &vdi.Lease{Namespace: "corral-vdi", Member: "x"}); return err }(),
	} {
		if vdi.ErrorCode(err) != vdi.ENotFound || strings.Contains(err.Error(), "\n") ||
			!strings.Contains(err.Error(), "is not one of the portal's pool namespaces") {
			t.Errorf("%s in namespace c: %v; want a one-line not-found naming it", name, err)
		}
	}
}
