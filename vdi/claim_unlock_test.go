package vdi_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// unlocksCounted is a Leases store with claim-lock Leases (no
// vdi.ClaimLocks of its own) that counts the locks let go.
type unlocksCounted struct {
	vdi.Leases
	unlocked atomic.Int32
}

func (s *unlocksCounted) Delete(ctx context.Context, l *vdi.Lease) error {
	err := s.Leases.Delete(ctx, l)
	if l.Pool == "claim.lock" && err == nil {
		s.unlocked.Add(1)
	}
	return err
}

// TestServiceClaim_AnswersBeforeLockLetGo: a claim whose caller answers
// first (vdi.WithAnswerFirst, the HTTP handlers) returns once its
// member's Lease is written and lets its user's claim lock go when the
// caller has answered (two writes before the answer, not three); her
// next claim then takes the lock and answers with the same desktop.
// Without WithAnswerFirst a claim lets the lock go before it returns.
func TestServiceClaim_AnswersBeforeLockLetGo(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	leases := &unlocksCounted{Leases: db.Leases()}
	svc := vdi.NewService(vdi.Config{Backend: newPoolBackend(vdi.ModeEphemeral, "demo-1", "demo-2"), Leases: leases, Audit: db})
	alice := vdi.Identity{Login: "alice"}

	actx, answered := vdi.WithAnswerFirst(ctx)
	d, err := svc.Claim(actx, alice, "local", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if n := leases.unlocked.Load(); n != 0 {
		t.Errorf("the claim let its lock go before it answered (%d let go); want it after", n)
	}
	answered()
	answered() // once is enough
	if n := leases.unlocked.Load(); n != 1 {
		t.Errorf("%d locks let go once the claim was answered; want 1", n)
	}

	again, err := svc.Claim(ctx, alice, "local", "demo")
	if err != nil || again.Name != d.Name {
		t.Errorf("alice's next claim: %s, %v; want %s, the desktop she holds", again.Name, err, d.Name)
	}
	if n := leases.unlocked.Load(); n != 2 {
		t.Errorf("%d locks let go after a claim without WithAnswerFirst returned; want 2", n)
	}
}
