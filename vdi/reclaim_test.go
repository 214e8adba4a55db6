package vdi_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestPolicyNext(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	lease := &vdi.Lease{AcquireTime: t0, RenewTime: t0, Duration: time.Hour}
	policy := vdi.Policy{DisconnectGrace: 15 * time.Minute, MaxSession: 8 * time.Hour, IdleTimeout: 30 * time.Minute}
	for _, tc := range []struct {
		name     string
		policy   vdi.Policy
		facts    vdi.SessionFacts
		now      time.Time
		wantRule string
		wantAt   time.Time
	}{
		{"never connected: grace from the claim", policy, vdi.SessionFacts{}, at(time.Minute), vdi.RuleDisconnect, at(15 * time.Minute)},
		{"console open: idle from the claim", policy, vdi.SessionFacts{Consoles: 1, ConsolesSeen: at(time.Minute)}, at(2 * time.Minute), vdi.RuleIdle, at(30 * time.Minute)},
		{"console open with input: idle from the input", policy,
			vdi.SessionFacts{Consoles: 1, ConsolesSeen: at(time.Hour), LastInput: at(50 * time.Minute)}, at(time.Hour), vdi.RuleIdle, at(80 * time.Minute)},
		{"disconnected: grace from the disconnect", vdi.Policy{DisconnectGrace: 15 * time.Minute},
			vdi.SessionFacts{LastDisconnect: at(time.Hour)}, at(time.Hour), vdi.RuleDisconnect, at(75 * time.Minute)},
		{"crashed portal's console: grace from its last heartbeat", vdi.Policy{DisconnectGrace: 15 * time.Minute},
			vdi.SessionFacts{Consoles: 2, ConsolesSeen: at(time.Hour)}, at(2 * time.Hour), vdi.RuleDisconnect, at(75 * time.Minute)},
		{"max session comes first", vdi.Policy{DisconnectGrace: 15 * time.Minute, MaxSession: time.Hour},
			vdi.SessionFacts{Consoles: 1, ConsolesSeen: at(59 * time.Minute)}, at(59 * time.Minute), vdi.RuleMaxSession, at(time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.policy.Next(lease, tc.facts, tc.now)
			if !ok || got.Rule != tc.wantRule || !got.At.Equal(tc.wantAt) {
				t.Errorf("Next = %+v, %v; want %s at %v", got, ok, tc.wantRule, tc.wantAt.Sub(t0))
			}
		})
	}
	if _, ok := (vdi.Policy{}).Next(lease, vdi.SessionFacts{}, t0); ok {
		t.Error("a policy with every rule off gave a deadline")
	}
}

func TestPolicyEffective(t *testing.T) {
	defaults := vdi.Policy{DisconnectGrace: 15 * time.Minute, IdleTimeout: time.Hour}
	got := vdi.Policy{DisconnectGrace: time.Minute, MaxSession: 2 * time.Hour}.Effective(defaults)
	want := vdi.Policy{DisconnectGrace: time.Minute, MaxSession: 2 * time.Hour, IdleTimeout: time.Hour}
	if got != want {
		t.Errorf("Effective = %+v; want %+v (the pool's own values win)", got, want)
	}
}

func TestReclaimDue(t *testing.T) {
	ctx := context.Background()
	alice := vdi.Identity{Login: "alice"}
	var db *store.DB
	setup := func(t *testing.T, policy vdi.Policy) (*vdi.Service, *poolBackend, *time.Time) {
		now := time.Unix(1_800_000_000, 0)
		b := newPoolBackend(vdi.ModePersistent, "demo-1")
		var svc *vdi.Service
		svc, db = newServiceWithPolicy(t, b, &now, policy)
		return svc, b, &now
	}

	t.Run("DisconnectGrace", func(t *testing.T) {
		svc, b, now := setup(t, vdi.Policy{DisconnectGrace: 15 * time.Minute})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		svc.ConsoleOpened(ctx, d.Ref())
		*now = now.Add(50 * time.Minute)
		svc.ConsoleHeartbeat(ctx, d.Ref())
		mustReclaim(t, svc, 0)
		svc.ConsoleClosed(ctx, d.Ref())
		*now = now.Add(14 * time.Minute)
		mustReclaim(t, svc, 0)
		*now = now.Add(time.Minute)
		mustReclaim(t, svc, 1)
		mustCount(t, svc, vdi.RuleDisconnect)
		if c := svc.Counters(); c.ClaimsCold != 1 || c.ClaimsWarm != 0 {
			t.Errorf("counted %d cold and %d warm claims; want alice's one claim of a stopped member, cold", c.ClaimsCold, c.ClaimsWarm)
		}
		if b.power["demo-1"] != vdi.PowerStopped {
			t.Errorf("reclaimed persistent member is %s; want stopped", b.power["demo-1"])
		}
		if _, err := svc.Desktop(ctx, alice, d.Ref()); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("alice after reclaim: %v; want EForbidden (no longer hers)", err)
		}
	})

	t.Run("ReconnectInsideGraceCancelsIt", func(t *testing.T) {
		svc, _, now := setup(t, vdi.Policy{DisconnectGrace: 15 * time.Minute})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		svc.ConsoleOpened(ctx, d.Ref())
		svc.ConsoleClosed(ctx, d.Ref())
		*now = now.Add(10 * time.Minute)
		svc.ConsoleOpened(ctx, d.Ref())
		*now = now.Add(10 * time.Minute)
		svc.ConsoleHeartbeat(ctx, d.Ref())
		mustReclaim(t, svc, 0)
	})

	t.Run("ConsolesOfACrashedPortalExpire", func(t *testing.T) {
		svc, _, now := setup(t, vdi.Policy{DisconnectGrace: 15 * time.Minute})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		svc.ConsoleOpened(ctx, d.Ref()) // and the portal dies: no close, no heartbeat
		*now = now.Add(15*time.Minute - time.Second)
		mustReclaim(t, svc, 0)
		*now = now.Add(time.Second)
		mustReclaim(t, svc, 1)
	})

	t.Run("IdleNeedsRealInput", func(t *testing.T) {
		svc, _, now := setup(t, vdi.Policy{IdleTimeout: 30 * time.Minute})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		svc.ConsoleOpened(ctx, d.Ref())
		for range 5 { // frames flow, heartbeats go on, someone types now and then
			*now = now.Add(20 * time.Minute)
			svc.ConsoleHeartbeat(ctx, d.Ref())
			svc.Input(ctx, d.Ref(), *now)
			mustReclaim(t, svc, 0)
		}
		*now = now.Add(29 * time.Minute) // only heartbeats: nobody touches it
		svc.ConsoleHeartbeat(ctx, d.Ref())
		mustReclaim(t, svc, 0)
		*now = now.Add(time.Minute)
		svc.ConsoleHeartbeat(ctx, d.Ref())
		mustReclaim(t, svc, 1)
		mustCount(t, svc, vdi.RuleIdle)
	})

	t.Run("MaxSessionIgnoresActivity", func(t *testing.T) {
		svc, _, now := setup(t, vdi.Policy{MaxSession: 2 * time.Hour})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		svc.ConsoleOpened(ctx, d.Ref())
		for range 3 {
			*now = now.Add(40 * time.Minute)
			svc.ConsoleHeartbeat(ctx, d.Ref())
		}
		*now = now.Add(-time.Second)
		svc.Input(ctx, d.Ref(), *now)
		mustReclaim(t, svc, 0)
		*now = now.Add(time.Second)
		mustReclaim(t, svc, 1)
		mustCount(t, svc, vdi.RuleMaxSession)
	})

	t.Run("ReleaseClosesConsolesWithAReason", func(t *testing.T) {
		svc, _, _ := setup(t, vdi.Policy{})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		cctx, cancel := context.WithCancelCause(ctx)
		defer svc.TrackConsole(d.Ref(), cancel)()
		if err := svc.Release(ctx, vdi.Identity{Login: "ops", Admin: true}, d.Ref(), "maintenance"); err != nil {
			t.Fatal(err)
		}
		if cause := context.Cause(cctx); cause == nil || !strings.Contains(cause.Error(), "ops") || !strings.Contains(cause.Error(), "maintenance") {
			t.Errorf("console's cause after force-release = %v; want who and why", cause)
		}
	})

	// Issue 58: a console whose desktop stopped before it heard why tells
	// its user the desktop is stopped (with a Start that can only fail),
	// not that it was released.
	t.Run("ReleaseStopsAfterItsConsolesClose", func(t *testing.T) {
		now := time.Unix(1_800_000_000, 0)
		b := &stopOrder{poolBackend: newPoolBackend(vdi.ModePersistent, "demo-1")}
		svc, _ := newServiceWithPolicy(t, b, &now, vdi.Policy{})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		cctx, cancel := context.WithCancelCause(ctx)
		untrack := svc.TrackConsole(d.Ref(), cancel)
		go func() {
			<-cctx.Done()
			time.Sleep(100 * time.Millisecond) // the console's close frame on its way
			b.closed.Store(true)
			untrack()
		}()
		if err := svc.Release(ctx, alice, d.Ref(), ""); err != nil {
			t.Fatal(err)
		}
		if !b.stopped.Load() {
			t.Fatal("the released desktop was not stopped")
		}
		if b.early.Load() {
			t.Error("the desktop was stopped before its console closed with the reason")
		}
	})

	t.Run("ExpiredClaimIsCleanedUp", func(t *testing.T) {
		svc, b, now := setup(t, vdi.Policy{})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		*now = now.Add(vdi.DefaultLeaseDuration)
		mustReclaim(t, svc, 1)
		mustCount(t, svc, vdi.RuleExpired)
		if b.power[d.Name] != vdi.PowerStopped {
			t.Errorf("member of an expired claim is %s; want stopped", b.power[d.Name])
		}
		log, _ := db.AuditLog(ctx, 1)
		if len(log) != 1 || !strings.Contains(log[0].Detail, vdi.RuleExpired) {
			t.Errorf("audit %+v; want the reclaim with rule %s", log, vdi.RuleExpired)
		}
	})

	t.Run("MalformedFactsAreNotTrusted", func(t *testing.T) {
		svc, _, now := setup(t, vdi.Policy{DisconnectGrace: 15 * time.Minute})
		d, _ := svc.Claim(ctx, alice, "local", "demo")
		l, err := db.Leases().Get(ctx, d.Ref())
		if err != nil {
			t.Fatal(err)
		}
		l.Annotations = map[string]string{vdi.AnnotationConsoles: "-3", vdi.AnnotationLastDisconnect: "yesterday"}
		if _, err := vdi.FactsOf(l); err == nil {
			t.Error("FactsOf accepted nonsense annotations")
		}
		if _, err := db.Leases().Update(ctx, l); err != nil {
			t.Fatal(err)
		}
		*now = now.Add(15 * time.Minute)
		mustReclaim(t, svc, 1) // read as "never connected": grace from the claim
	})
}

func mustReclaim(t *testing.T, svc *vdi.Service, want int) {
	t.Helper()
	n, err := svc.ReclaimDue(context.Background())
	if err != nil || n != want {
		t.Fatalf("ReclaimDue = %d, %v; want %d", n, err, want)
	}
}

// mustCount checks that svc counted one reclaim, by rule, and none by the
// other rules (the metrics' corral_vdi_reclaims_total).
func mustCount(t *testing.T, svc *vdi.Service, rule string) {
	t.Helper()
	for r, n := range svc.Counters().Reclaims {
		if want := map[bool]uint64{true: 1}[r == rule]; n != want {
			t.Errorf("counted %d reclaims by %s; want %d (one reclaim, by %s)", n, r, want, rule)
		}
	}
	if len(svc.Counters().Reclaims) != len(vdi.ReclaimRules) {
		t.Errorf("counted reclaims by %v; want every rule of %v", svc.Counters().Reclaims, vdi.ReclaimRules)
	}
}

// stopOrder is a backend that notes whether a Stop came before the
// console under test had closed.
type stopOrder struct {
	*poolBackend
	closed, stopped, early atomic.Bool
}

func (b *stopOrder) Stop(ctx context.Context, r vdi.Ref) error {
	b.early.Store(!b.closed.Load())
	b.stopped.Store(true)
	return b.poolBackend.Stop(ctx, r)
}
