package vdi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// lpool names leasetest.Pool so that adminPool may embed it (a field
// named Pool would hide its Pool method).
type lpool = leasetest.Pool

// adminPool is a leasetest pool whose standby an admin may change.
type adminPool struct{ *lpool }

var errNotHere = errors.New("not in this test")

func (adminPool) CreatePool(context.Context, vdi.Pool) error { return errNotHere }
func (adminPool) ResizePool(context.Context, string, string, int, func(string) bool) error {
	return errNotHere
}
func (adminPool) SetPolicy(context.Context, string, string, vdi.Policy) error { return errNotHere }
func (adminPool) SetAccess(context.Context, string, string, vdi.Access, vdi.Limits) error {
	return errNotHere
}
func (adminPool) DeletePool(context.Context, string, string) error { return errNotHere }
func (a adminPool) SetStandby(_ context.Context, _, _ string, st vdi.Standby, sched vdi.StandbySchedule) error {
	a.Standby, a.StandbySchedule = st, sched
	return nil
}

// fakeClock is a clock a test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

func TestStandbyWant(t *testing.T) {
	perMin := func(n float64) float64 { return n / 60 }
	for _, tc := range []struct {
		st    vdi.Standby
		rate  float64 // claims a second
		start time.Duration
		want  int
	}{
		{vdi.Fixed(3), perMin(50), time.Minute, 3},
		{vdi.Fixed(0), perMin(50), time.Minute, 0},
		{vdi.Standby{Min: 1, Max: 40}, 0, time.Minute, 1},
		{vdi.Standby{Min: 0, Max: 40}, 0, time.Minute, 0},
		{vdi.Standby{Min: 0, Max: 40}, perMin(0.3), time.Second, 1},      // a claim in 200 starts: one warm
		{vdi.Standby{Min: 1, Max: 40}, perMin(1), time.Minute, 5},        // 1 in a start: 4 or more 1.9 % of the time, 5 or more 0.4 %
		{vdi.Standby{Min: 1, Max: 40}, perMin(5), time.Minute, 12},       // mean 5
		{vdi.Standby{Min: 1, Max: 40}, perMin(10), 90 * time.Second, 26}, // mean 15
		{vdi.Standby{Min: 1, Max: 20}, perMin(100), time.Minute, 20},     // clamped to max
		{vdi.Standby{Min: 4, Max: 8}, perMin(0.1), time.Second, 4},       // clamped to min
	} {
		if got := tc.st.Want(tc.rate, tc.start, 1); got != tc.want {
			t.Errorf("%s.Want(%.3f claims/s, start %v) = %d; want %d", tc.st, tc.rate, tc.start, got, tc.want)
		}
	}
}

// TestClaimRate: the rate is the window's claims over the window until
// burstSample of them are in it, then the larger of that and the latest
// ones over their time, so a burst shows within seconds and fades as it
// ends; claims older than the window, or stamped in the future, count
// for nothing.
func TestClaimRate(t *testing.T) {
	now := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	held := func(ages ...time.Duration) map[string]*vdi.Lease {
		m := map[string]*vdi.Lease{}
		for i, a := range ages {
			m[fmt.Sprint("m", i)] = &vdi.Lease{AcquireTime: now.Add(-a)}
		}
		return m
	}
	every := func(n int, gap, from time.Duration) []time.Duration {
		var out []time.Duration
		for i := range n {
			out = append(out, from+time.Duration(i)*gap)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		ages []time.Duration
		want float64
	}{
		{"none", nil, 0},
		{"10 over the window", every(10, time.Minute, 0), 10.0 / 600},
		{"19 in a second: too few to time", every(19, 50*time.Millisecond, 0), 19.0 / 600},
		{"a burst of 60, 10 a second", every(60, 100*time.Millisecond, 0), 19 / 1.9},
		{"the burst ended a minute ago", every(60, 100*time.Millisecond, time.Minute), 19 / 61.9},
		{"the burst ended 20 minutes ago", every(60, 100*time.Millisecond, 20*time.Minute), 0},
		{"20 at the same instant", every(20, 0, 0), 19 / 0.001},
		{"stamped in the future", every(30, 0, -time.Minute), 0},
	} {
		if got := vdi.ClaimRate(held(tc.ages...), now); math.Abs(got-tc.want) > 1e-9*max(1, tc.want) {
			t.Errorf("%s: ClaimRate = %.6f/s; want %.6f/s", tc.name, got, tc.want)
		}
	}
}

func TestStandbyJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want vdi.Standby
		out  string
	}{
		{`2`, vdi.Fixed(2), `2`},
		{`{"min": 1, "max": 20}`, vdi.Standby{Min: 1, Max: 20}, `{"min":1,"max":20}`},
		{`{"min": 3}`, vdi.Fixed(3), `3`},
		{`{"min": 5, "max": 5}`, vdi.Fixed(5), `5`},
		{`{"min": 5, "max": 2}`, vdi.Standby{Min: 5, Max: 2}, `{"min":5,"max":2}`}, // kept as written, for the portal to refuse
	} {
		var got vdi.Standby
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil || got != tc.want {
			t.Errorf("Unmarshal(%s) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
		if b, _ := json.Marshal(got); string(b) != tc.out {
			t.Errorf("Marshal(%+v) = %s; want %s", got, b, tc.out)
		}
	}
	for _, bad := range []string{`"two"`, `{"max": 3}`, `{"min": 1, "max": 2, "avg": 1}`, `1.5`} {
		var got vdi.Standby
		if err := json.Unmarshal([]byte(bad), &got); err == nil || !strings.Contains(err.Error(), "standby") {
			t.Errorf("Unmarshal(%s) = %+v, %v; want an error saying how to write a standby", bad, got, err)
		}
	}
}

func TestStandbySchedule(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	office := vdi.StandbySchedule{Days: "mon-fri", From: "08:00", To: "18:00", Standby: 10, Timezone: "Europe/Berlin"}
	night := vdi.StandbySchedule{Days: "fri,sat", From: "22:00", To: "02:00", Standby: 3}
	for _, tc := range []struct {
		s    vdi.StandbySchedule
		at   time.Time
		want int
	}{
		{office, time.Date(2026, 12, 7, 8, 0, 0, 0, berlin), 10},    // Monday at opening
		{office, time.Date(2026, 12, 7, 7, 59, 0, 0, berlin), 0},    // a minute before
		{office, time.Date(2026, 12, 11, 17, 59, 0, 0, berlin), 10}, // Friday
		{office, time.Date(2026, 12, 11, 18, 0, 0, 0, berlin), 0},   // closing is outside
		{office, time.Date(2026, 12, 12, 10, 0, 0, 0, berlin), 0},   // Saturday
		{office, time.Date(2026, 12, 7, 7, 30, 0, 0, time.UTC), 10}, // 08:30 in Berlin
		{night, time.Date(2026, 12, 11, 23, 0, 0, 0, time.UTC), 3},  // Friday night
		{night, time.Date(2026, 12, 13, 1, 0, 0, 0, time.UTC), 3},   // Sunday 01:00: Saturday's window
		{night, time.Date(2026, 12, 14, 1, 0, 0, 0, time.UTC), 0},   // Monday 01:00: Sunday has none
		{vdi.StandbySchedule{}, time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC), 0},
	} {
		if got := tc.s.Floor(tc.at); got != tc.want {
			t.Errorf("%s at %s = %d; want %d", tc.s, tc.at.Format(time.RFC1123), got, tc.want)
		}
	}
}

// TestStandbyFollowsDemand runs a pool whose standby follows demand on
// the leasetest backend with a fake clock: with no claims it keeps its
// min; claims within the window raise it to cover the claims that
// arrive while a member starts (the start time measured from its own
// standby starts); once they age out of the
// window it falls back; the schedule raises the floor in its hours only;
// and bad input is refused with what to write.
func TestStandbyFollowsDemand(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	clock := &fakeClock{now: time.Date(2026, 12, 12, 10, 0, 0, 0, berlin)} // a Saturday
	pool := leasetest.NewPool("local", "office", 60, 0)
	pool.Standby = vdi.Standby{Min: 1, Max: 20}
	var measuring sync.Mutex
	playing := true
	pool.OnStart = func(string) {
		measuring.Lock()
		defer measuring.Unlock()
		if playing {
			clock.Add(2 * time.Minute) // the start time the pool's members take
		}
	}
	db.Now = clock.Now
	svc := vdi.NewService(vdi.Config{Backend: adminPool{pool}, Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler), Now: clock.Now})
	want := func() int {
		t.Helper()
		ds, err := svc.Dashboard(ctx, vdi.Identity{Login: "root", Admin: true})
		if err != nil || len(ds) != 1 {
			t.Fatalf("dashboard: %d pools, %v", len(ds), err)
		}
		return ds[0].StandbyNow
	}

	if got := want(); got != 1 {
		t.Errorf("standby with no claims = %d; want its min, 1", got)
	}
	if n, err := svc.KeepStandby(ctx); err != nil || n != 1 {
		t.Fatalf("KeepStandby with no claims started %d, %v; want 1 (the min)", n, err)
	}
	waitFor(t, "the first standby member running", func() bool { return running(pool, "office-1") == 1 })
	measuring.Lock()
	playing = false
	measuring.Unlock()

	// 10 claims 30 s apart, a claim a minute: at a 2-minute start time 2
	// arrive while a member starts, 7 or more 0.5 % of the time: 7 warm.
	for i := range 10 {
		if _, err := svc.Claim(ctx, vdi.Identity{Login: fmt.Sprintf("user%d", i)}, "local", "office"); err != nil {
			t.Fatal(err)
		}
		clock.Add(30 * time.Second)
	}
	waitFor(t, "the standby start time noted", func() bool { return want() == 7 })
	if n, err := svc.KeepStandby(ctx); err != nil || n != 7 {
		t.Errorf("KeepStandby after a claim a minute started %d, %v; want 7 (the claims during a start, covered 99 times in 100)", n, err)
	}
	clock.Add(vdi.StandbyWindow)
	if got := want(); got != 1 {
		t.Errorf("standby once the claims left the window = %d; want its min, 1", got)
	}

	// The schedule: 10 on weekdays 08:00-18:00 in Berlin.
	root := vdi.Identity{Login: "root", Admin: true}
	sched := vdi.StandbySchedule{Days: "mon-fri", From: "08:00", To: "18:00", Standby: 10, Timezone: "Europe/Berlin"}
	if err := svc.UpdatePool(ctx, root, "local", "office", vdi.PoolUpdate{StandbySchedule: &sched}); err != nil {
		t.Fatal(err)
	}
	if pool.StandbySchedule != sched || pool.Standby != (vdi.Standby{Min: 1, Max: 20}) {
		t.Fatalf("after the update: standby %s, schedule %s; want 1-20 kept and %s", pool.Standby, pool.StandbySchedule, sched)
	}
	audit, err := db.AuditLog(ctx, 1)
	if err != nil || len(audit) != 1 || audit[0].Action != "pool-standby" || !strings.Contains(audit[0].Detail, "10 on mon-fri 08:00-18:00 Europe/Berlin") {
		t.Errorf("audit = %+v, %v; want the pool-standby line naming the schedule", audit, err)
	}
	if got := want(); got != 1 {
		t.Errorf("standby on a Saturday with a weekday schedule = %d; want 1", got)
	}
	clock.Set(time.Date(2026, 12, 14, 8, 0, 0, 0, berlin)) // Monday morning
	if got := want(); got != 10 {
		t.Errorf("standby on Monday 08:00 with the schedule = %d; want its floor, 10", got)
	}

	for _, tc := range []struct {
		name string
		u    vdi.PoolUpdate
		says string
	}{
		{"MaxBelowMin", vdi.PoolUpdate{Standby: &vdi.Standby{Min: 5, Max: 2}}, `{"min": 2, "max": 5}`},
		{"UnknownDay", vdi.PoolUpdate{StandbySchedule: &vdi.StandbySchedule{Days: "mon-fry", From: "08:00", To: "18:00", Standby: 2}}, `"mon-fri"`},
		{"BadTime", vdi.PoolUpdate{StandbySchedule: &vdi.StandbySchedule{Days: "mon", From: "8am", To: "18:00", Standby: 2}}, "HH:MM"},
		{"UnknownZone", vdi.PoolUpdate{StandbySchedule: &vdi.StandbySchedule{Days: "mon", From: "08:00", To: "18:00", Standby: 2, Timezone: "Europe/Atlantis"}}, "IANA"},
		{"NoStandby", vdi.PoolUpdate{StandbySchedule: &vdi.StandbySchedule{Days: "mon", From: "08:00", To: "18:00"}}, "how many"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := svc.UpdatePool(ctx, root, "local", "office", tc.u)
			var ve *vdi.Error
			if !errors.As(err, &ve) || ve.Code != vdi.EInvalid || !strings.Contains(ve.Hint, tc.says) {
				t.Errorf("UpdatePool: %v; want an invalid-input refusal whose hint says %s", err, tc.says)
			}
		})
	}
}

// TestStandbyRate_OnlyHeldClaimsCount is the attacker's row of the
// demand rule: one user claiming and releasing in a loop, as fast as she
// can, holds one desktop at a time, and the standby (desktops the pool
// keeps on, at its cost) does not follow her; as many users holding one
// each, it does.
func TestStandbyRate_OnlyHeldClaimsCount(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clock := &fakeClock{now: time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)}
	pool := leasetest.NewPool("local", "office", 60, 0)
	pool.Standby = vdi.Standby{Min: 0, Max: 20}
	db.Now = clock.Now
	svc := vdi.NewService(vdi.Config{Backend: adminPool{pool}, Leases: db.Leases(), Audit: db, Log: slog.New(slog.DiscardHandler), Now: clock.Now})
	want := func() int {
		t.Helper()
		ds, err := svc.Dashboard(ctx, vdi.Identity{Login: "root", Admin: true})
		if err != nil || len(ds) != 1 {
			t.Fatalf("dashboard: %d pools, %v", len(ds), err)
		}
		return ds[0].StandbyNow
	}
	mallory := vdi.Identity{Login: "mallory"}
	for range 40 {
		d, err := svc.Claim(ctx, mallory, "local", "office")
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Release(ctx, mallory, d.Ref(), ""); err != nil {
			t.Fatal(err)
		}
		clock.Add(100 * time.Millisecond)
	}
	if got := want(); got != 0 {
		t.Errorf("standby after one user claimed and released 40 times in 4 s = %d; want 0 (she holds none)", got)
	}
	for i := range 40 {
		if _, err := svc.Claim(ctx, vdi.Identity{Login: fmt.Sprintf("user%d", i)}, "local", "office"); err != nil {
			t.Fatal(err)
		}
		clock.Add(100 * time.Millisecond)
	}
	if got := want(); got == 0 {
		t.Errorf("standby after 40 users each claimed one in 4 s = 0; want it to follow them")
	}
}
