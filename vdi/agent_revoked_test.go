package vdi_test

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// TestOverseeAgent_Revoked: a Stop whose token was revoked says so on
// the claim (AgentRevoked) for that token only; letting agents go on
// then lifts the stop and forgets the revoked agent, and the next
// agent's work names it afresh.
func TestOverseeAgent_Revoked(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC)
	svc := vdi.NewService(vdi.Config{Backend: leasetest.NewPool("local", "team", 1, 1), Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler),
		Now: func() time.Time { return now }})
	alice := vdi.Identity{Login: "alice"}
	runner := vdi.Identity{Login: "alice", Token: &vdi.TokenScope{ID: "t-runner", Name: "runner"}}
	helper := vdi.Identity{Login: "alice", Token: &vdi.TokenScope{ID: "t-helper", Name: "helper"}}
	d, err := svc.Claim(ctx, alice, "local", "team")
	if err != nil {
		t.Fatal(err)
	}
	ref := d.Ref()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(svc.MarkAgent(ctx, runner, ref))
	_, err = svc.OverseeAgent(ctx, alice, ref, vdi.OversightStop)
	must(err)
	must(svc.NoteAgentRevoked(ctx, ref, "t-other")) // not the token the claim names
	if d, _ = svc.Desktop(ctx, alice, ref); d.AgentRevoked {
		t.Error("a revoke of a token the claim does not name marked its agent revoked")
	}
	must(svc.NoteAgentRevoked(ctx, ref, "t-runner"))
	if d, _ = svc.Desktop(ctx, alice, ref); !d.AgentRevoked || d.AgentStopped != "alice" || d.Agent != "bot:alice/runner" {
		t.Errorf("after the stop with its token revoked: agent %q, stopped by %q, revoked %v; want bot:alice/runner, alice, true", d.Agent, d.AgentStopped, d.AgentRevoked)
	}
	if err := vdi.AgentBarred(d, false); err == nil {
		t.Error("another agent's call is not refused while the stop holds")
	}
	d, err = svc.OverseeAgent(ctx, alice, ref, vdi.OversightGoOn)
	must(err)
	if d.Agent != "" || d.AgentStopped != "" || d.AgentRevoked || vdi.AgentBarred(d, true) != nil {
		t.Errorf("after go-on: agent %q, stopped by %q, revoked %v; want none", d.Agent, d.AgentStopped, d.AgentRevoked)
	}
	must(svc.MarkAgent(ctx, helper, ref))
	if d, _ = svc.Desktop(ctx, alice, ref); d.Agent != "bot:alice/helper" || d.AgentRevoked {
		t.Errorf("the next agent at work: %q, revoked %v; want bot:alice/helper, false", d.Agent, d.AgentRevoked)
	}
	// A go-on of an agent whose token stays keeps it named.
	_, err = svc.OverseeAgent(ctx, alice, ref, vdi.OversightStop)
	must(err)
	d, err = svc.OverseeAgent(ctx, alice, ref, vdi.OversightGoOn)
	must(err)
	if d.Agent != "bot:alice/helper" || d.AgentStopped != "" {
		t.Errorf("after a stop and go-on without a revoke: agent %q, stopped by %q; want bot:alice/helper, none", d.Agent, d.AgentStopped)
	}
}
