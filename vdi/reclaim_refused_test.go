package vdi_test

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// refuser is a cluster backend (a PoolGrower) that refuses to make its
// members fresh while refuse is set, as a Closed pool's member with no
// access of its own is refused (kube: ownDefinition).
type refuser struct {
	*recloner
	refuse atomic.Bool
}

func (b *refuser) PlanRecreate(ctx context.Context, r vdi.Ref) (vdi.Growth, error) {
	if b.refuse.Load() {
		return vdi.Growth{}, vdi.Errorf(vdi.EConflict, "Set the pool's access (and policy) again.", "Desktop %s cannot be made fresh.", r)
	}
	return b.recloner.PlanRecreate(ctx, r)
}

// TestReclaim_RefusedResetIsLogged: a reclaim whose reset the backend
// refuses (a Closed pool's member) is no silent "renewed meanwhile": the
// loop logs it once per member per hour with why and what to do, counts
// it each round, keeps the claim as it was (unmarked, its holder's), and
// reclaims it once the backend lets it; a later refusal is news again.
func TestReclaim_RefusedResetIsLogged(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_800_000_000, 0)
	b := &refuser{recloner: &recloner{poolBackend: newPoolBackend(vdi.ModeEphemeral, "demo-1"), gate: make(chan struct{}), cloned: make(chan string, 4)}}
	close(b.gate)
	b.refuse.Store(true)
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var logs testlog.Buffer
	svc := vdi.NewService(vdi.Config{Backend: b, Leases: db.Leases(), Audit: db, Now: func() time.Time { return now },
		Policy: vdi.Policy{DisconnectGrace: time.Minute}, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	t.Cleanup(svc.StopJobs)
	ref := vdi.Ref{Namespace: "local", Name: "demo-1"}
	const line = "reclaim refused"
	claimDue := func(user string) {
		t.Helper()
		if _, err := svc.Claim(ctx, vdi.Identity{Login: user}, "local", "demo"); err != nil {
			t.Fatalf("%s's claim: %v", user, err)
		}
		now = now.Add(2 * time.Minute) // past its grace
	}
	claimDue("alice")
	for round := range 3 {
		if n, err := svc.ReclaimDue(ctx); err != nil || n != 0 {
			t.Fatalf("round %d: ReclaimDue = %d, %v; want 0 reclaimed and no error (a refusal is logged, not an error)", round, n, err)
		}
		now = now.Add(10 * time.Second)
	}
	if got := strings.Count(logs.String(), line); got != 1 {
		t.Errorf("%d %q lines after 3 refused rounds; want 1 (once per member per hour):\n%s", got, line, logs.String())
	}
	if s := logs.String(); !strings.Contains(s, "demo-1") || !strings.Contains(s, "Set the pool's access") || !strings.Contains(s, "disconnect-grace") {
		t.Errorf("the refusal's log line names no desktop, fix or rule:\n%s", s)
	}
	if got := svc.Counters().ReclaimsRefused[vdi.RuleDisconnect]; got != 3 {
		t.Errorf("refused reclaims counted: %d; want 3 (one each round)", got)
	}
	l, err := db.Leases().Get(ctx, ref)
	if err != nil || l.Holder != "alice" || l.Annotations[vdi.AnnotationReclaiming] != "" {
		t.Fatalf("alice's claim after refused reclaims: %+v, %v; want it kept, unmarked", l, err)
	}
	now = now.Add(time.Hour)
	if _, err := svc.ReclaimDue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), line); got != 2 {
		t.Errorf("%d %q lines an hour later; want 2", got, line)
	}

	// The admin repairs the pool: the next round reclaims it.
	b.refuse.Store(false)
	if n, err := svc.ReclaimDue(ctx); err != nil || n != 1 {
		t.Fatalf("ReclaimDue once the reset is let through = %d, %v; want 1", n, err)
	}
	waitLeaseGone(t, db.Leases(), ref)
	b.refuse.Store(true)
	claimDue("bob")
	if _, err := svc.ReclaimDue(ctx); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), line); got != 3 {
		t.Errorf("%d %q lines after bob's claim was refused too; want 3 (a refusal after a reclaim is news)", got, line)
	}
	// The holder's own release answers the refusal at once (409), not
	// after retrying it as a race.
	if err := svc.Release(ctx, vdi.Identity{Login: "bob"}, ref, ""); vdi.ErrorCode(err) != vdi.EConflict || !strings.Contains(err.Error(), "cannot be made fresh") {
		t.Errorf("bob's release of a member whose reset is refused: %v; want EConflict saying why", err)
	}
	l, err = db.Leases().Get(ctx, ref)
	if errors.Is(err, vdi.ErrNotFound) {
		t.Fatal("bob's claim is gone after a refused release; want it kept")
	} else if err != nil {
		t.Fatal(err)
	}

	// A release whose portal died before it planned the reset leaves a
	// mark with no plan; the loop takes it over once stale (unchanged
	// for reclaimStale since this replica saw it), and its refusal is
	// counted as a release's.
	l.Annotations = map[string]string{vdi.AnnotationReclaiming: vdi.MarkRelease}
	if _, err := db.Leases().Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	for i, want := range []uint64{0, 1} { // seen, then seen unchanged reclaimStale later
		if _, err := svc.ReclaimDue(ctx); err != nil {
			t.Fatal(err)
		}
		if got := svc.Counters().ReclaimsRefused[vdi.MarkRelease]; got != want {
			t.Errorf("refused resets of a release mark counted after round %d: %d; want %d", i+1, got, want)
		}
		now = now.Add(31 * time.Second)
	}
}
