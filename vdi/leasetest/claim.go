package leasetest

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// service returns a quiet vdi.Service over pool and leases with the clock
// now (the real clock when now is nil).
func service(pool *Pool, leases vdi.Leases, now func() time.Time) *vdi.Service {
	return vdi.NewService(vdi.Config{Backend: pool, Leases: leases, Audit: nopAudit{}, Now: now,
		Log: slog.New(slog.DiscardHandler)})
}

func testClaim(t *testing.T, s Store) {
	ctx := context.Background()
	id := func(login string) vdi.Identity { return vdi.Identity{Login: login} }

	t.Run("PrefersRunningThenStopped", func(t *testing.T) {
		pool := NewPool(s.Namespace, "prefer", 4, 2)
		svc := service(pool, s.Open(t), nil)
		for i, user := range []string{"alice", "bob", "carol"} {
			d, err := svc.Claim(ctx, id(user), s.Namespace, "prefer")
			if err != nil {
				t.Fatalf("claim %d by %s: %v", i+1, user, err)
			}
			if i < 2 && d.Name != "prefer-1" && d.Name != "prefer-2" {
				t.Errorf("%s got %s; want one of the running members prefer-1, prefer-2", user, d.Name)
			}
			if d.Power != vdi.PowerRunning || d.Holder != user {
				t.Errorf("%s got %+v; want it running and held by %s", user, d, user)
			}
		}
	})
	t.Run("SameUserGetsSameDesktop", func(t *testing.T) {
		pool := NewPool(s.Namespace, "again", 3, 0)
		svc := service(pool, s.Open(t), nil)
		first, err := svc.Claim(ctx, id("alice"), s.Namespace, "again")
		if err != nil {
			t.Fatal(err)
		}
		again, err := svc.Claim(ctx, id("alice"), s.Namespace, "again")
		if err != nil || again.Name != first.Name {
			t.Errorf("alice asking again got %s, %v; want %s", again.Name, err, first.Name)
		}
		// Another portal instance answers the same.
		other, err := service(pool, s.Open(t), nil).Claim(ctx, id("alice"), s.Namespace, "again")
		if err != nil || other.Name != first.Name {
			t.Errorf("alice asking another portal got %s, %v; want %s", other.Name, err, first.Name)
		}
	})
	t.Run("AllTakenIsConflict", func(t *testing.T) {
		pool := NewPool(s.Namespace, "full", 2, 2)
		svc := service(pool, s.Open(t), nil)
		for _, user := range []string{"alice", "bob"} {
			if _, err := svc.Claim(ctx, id(user), s.Namespace, "full"); err != nil {
				t.Fatal(err)
			}
		}
		_, err := svc.Claim(ctx, id("carol"), s.Namespace, "full")
		var e *vdi.Error
		if !errors.As(err, &e) || e.Code != vdi.EConflict || e.Msg == "" || e.Hint == "" {
			t.Errorf("carol's claim on a full pool: %#v; want an EConflict with a message and a hint", err)
		}
	})
	t.Run("ReleaseByHolderOrAdmin", func(t *testing.T) {
		pool := NewPool(s.Namespace, "release", 2, 2)
		leases := s.Open(t)
		audit := &auditLog{}
		svc := vdi.NewService(vdi.Config{Backend: pool, Leases: leases, Audit: audit, Log: slog.New(slog.DiscardHandler)})
		a, err := svc.Claim(ctx, id("alice"), s.Namespace, "release")
		if err != nil {
			t.Fatal(err)
		}
		b, err := svc.Claim(ctx, id("bob"), s.Namespace, "release")
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Release(ctx, id("bob"), a.Ref(), ""); vdi.ErrorCode(err) != vdi.EForbidden {
			t.Errorf("bob releasing alice's desktop: %v; want EForbidden", err)
		}
		if err := svc.Release(ctx, id("alice"), a.Ref(), ""); err != nil {
			t.Fatalf("alice releasing her desktop: %v", err)
		}
		if _, err := leases.Get(ctx, a.Ref()); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Lease after alice's release: %v; want ErrNotFound", err)
		}
		admin := vdi.Identity{Login: "root", Admin: true}
		if err := svc.Release(ctx, admin, b.Ref(), "maintenance"); err != nil {
			t.Fatalf("admin force-release: %v", err)
		}
		if _, err := leases.Get(ctx, b.Ref()); !errors.Is(err, vdi.ErrNotFound) {
			t.Errorf("Lease after the force-release: %v; want ErrNotFound", err)
		}
		if !audit.has("force-release", "root", b.Name) || !audit.has("release", "alice", a.Name) {
			t.Errorf("audit log %+v; want alice's release and root's force-release", audit.events)
		}
	})
	t.Run("FailedMirrorAnswersTheClaim", func(t *testing.T) {
		// The mirror is presentation: a claim answers when its Lease is
		// won, and the reclaim loop writes a mirror that failed.
		pool := NewPool(s.Namespace, "unmarked", 1, 1)
		leases := s.Open(t)
		svc := service(pool, leases, nil)
		pool.SetFailMirror(true)
		if d, err := svc.Claim(ctx, id("alice"), s.Namespace, "unmarked"); err != nil || d.Name != "unmarked-1" {
			t.Fatalf("claim with a failing mirror: %+v, %v; want unmarked-1", d, err)
		}
		if l, err := leases.Get(ctx, vdi.Ref{Namespace: s.Namespace, Name: "unmarked-1"}); err != nil || l.Holder != "alice" {
			t.Fatalf("after the failed mirror the Lease is %+v, %v; want alice holding it", l, err)
		}
		if _, err := svc.Claim(ctx, id("bob"), s.Namespace, "unmarked"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("bob's claim: %v; want EConflict", err)
		}
		pool.SetFailMirror(false)
		if _, err := svc.RepairMirrors(ctx); err != nil {
			t.Fatalf("repair mirrors: %v", err)
		}
		if got := pool.AssignedTo("unmarked-1"); got != "alice" {
			t.Errorf("unmarked-1 shown as assigned to %q after the repair; want alice", got)
		}
	})
	t.Run("FailedPowerOnKeepsTheClaim", func(t *testing.T) {
		pool := NewPool(s.Namespace, "broken", 1, 0)
		leases := s.Open(t)
		svc := service(pool, leases, nil)
		pool.SetFailStart(true)
		_, err := svc.Claim(ctx, id("alice"), s.Namespace, "broken")
		if vdi.ErrorCode(err) != vdi.EUnavailable {
			t.Fatalf("claim with a failing start: %v; want EUnavailable", err)
		}
		l, err := leases.Get(ctx, vdi.Ref{Namespace: s.Namespace, Name: "broken-1"})
		if err != nil || l.Holder != "alice" {
			t.Fatalf("after the failed start the Lease is %+v, %v; want alice still holding it", l, err)
		}
		if _, err := svc.Claim(ctx, id("bob"), s.Namespace, "broken"); vdi.ErrorCode(err) != vdi.EConflict {
			t.Errorf("bob's claim on alice's half-made desktop: %v; want EConflict", err)
		}
		pool.SetFailStart(false)
		d, err := svc.Claim(ctx, id("alice"), s.Namespace, "broken")
		if err != nil || d.Name != "broken-1" || d.Power != vdi.PowerRunning {
			t.Errorf("alice's retry: %+v, %v; want broken-1 running", d, err)
		}
	})
}

func testStaleTakeover(t *testing.T, s Store) {
	ctx := context.Background()
	a, b := s.Open(t), s.Open(t)

	t.Run("TwoUpdatesOneWins", func(t *testing.T) {
		for i := range 10 {
			member := "stale-cas-" + string(rune('a'+i))
			if _, err := a.Create(ctx, lease(s.Namespace, member, "old", t0)); err != nil {
				t.Fatal(err)
			}
			ref := vdi.Ref{Namespace: s.Namespace, Name: member}
			seenA, errA := a.Get(ctx, ref)
			seenB, errB := b.Get(ctx, ref)
			if errA != nil || errB != nil || seenA.ResourceVersion != seenB.ResourceVersion {
				t.Fatalf("both instances should see one Lease: %+v %v / %+v %v", seenA, errA, seenB, errB)
			}
			later := t0.Add(2 * time.Hour)
			if !seenA.Expired(later) {
				t.Fatalf("Lease renewed at %v for %v is not expired at %v", seenA.RenewTime, seenA.Duration, later)
			}
			takeA, takeB := *seenA, *seenB
			takeA.Holder, takeA.RenewTime = "alice", later
			takeB.Holder, takeB.RenewTime = "bob", later
			var errs [2]error
			var wg sync.WaitGroup
			start := make(chan struct{})
			for j, take := range []struct {
				leases vdi.Leases
				l      *vdi.Lease
			}{{a, &takeA}, {b, &takeB}} {
				wg.Go(func() {
					<-start
					_, errs[j] = take.leases.Update(ctx, take.l)
				})
			}
			close(start)
			wg.Wait()
			won := 0
			for _, err := range errs {
				if err == nil {
					won++
				} else if !errors.Is(err, vdi.ErrConflict) {
					t.Errorf("losing takeover: %v; want ErrConflict", err)
				}
			}
			if won != 1 {
				t.Fatalf("%d takers won the stale Lease %s; want exactly 1 (%v)", won, member, errs)
			}
		}
	})
	t.Run("TwoClaimsOneWins", func(t *testing.T) {
		// The clock is injected: the Lease is an hour old for both portals.
		now := t0.Add(2 * time.Hour)
		clock := func() time.Time { return now }
		for i := range 5 {
			poolName := "stale" + string(rune('a'+i))
			pool := NewPool(s.Namespace, poolName, 1, 1)
			old := lease(s.Namespace, poolName+"-1", "old", t0)
			old.Pool = poolName
			if _, err := a.Create(ctx, old); err != nil {
				t.Fatal(err)
			}
			waitListed(t, b, s.Namespace, poolName, 1)
			svcA, svcB := service(pool, a, clock), service(pool, b, clock)
			var errs [2]error
			var got [2]vdi.Desktop
			var wg sync.WaitGroup
			start := make(chan struct{})
			for j, c := range []struct {
				svc  *vdi.Service
				user string
			}{{svcA, "alice"}, {svcB, "bob"}} {
				wg.Go(func() {
					<-start
					got[j], errs[j] = c.svc.Claim(ctx, vdi.Identity{Login: c.user}, s.Namespace, poolName)
				})
			}
			close(start)
			wg.Wait()
			won := ""
			for j, err := range errs {
				switch {
				case err == nil && won == "":
					won = got[j].Holder
				case err == nil:
					t.Fatalf("both %s and %s won the stale member of %s", won, got[j].Holder, poolName)
				case vdi.ErrorCode(err) != vdi.EConflict:
					t.Errorf("losing claim: %v; want EConflict", err)
				}
			}
			l, err := a.Get(ctx, vdi.Ref{Namespace: s.Namespace, Name: poolName + "-1"})
			if won == "" || err != nil || l.Holder != won {
				t.Fatalf("winner %q, Lease %+v, %v; want one winner holding the Lease", won, l, err)
			}
		}
	})
}

// waitListed waits until leases lists n Leases in the pool (caches lag).
func waitListed(t *testing.T, leases vdi.Leases, ns, pool string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := leases.List(context.Background(), ns, pool)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("List(%s, %s) shows %d Leases after 10s; want %d", ns, pool, len(got), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
