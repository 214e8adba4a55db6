package vdi_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
	"github.com/corral-dev/corral-vdi-portal/vdi/leasetest"
)

// racingLeases lets another write land between a TakeConsole's read of
// the claim and its write (between, once), as a second replica's write
// does when two tabs open at almost the same moment.
type racingLeases struct {
	vdi.Leases
	mu      sync.Mutex
	between func() // run before the next Update, once
}

func (l *racingLeases) Update(ctx context.Context, lease *vdi.Lease) (*vdi.Lease, error) {
	l.mu.Lock()
	between := l.between
	l.between = nil
	l.mu.Unlock()
	if between != nil {
		between()
	}
	return l.Leases.Update(ctx, lease)
}

// TestTakeConsole_NewestInEveryOrder: of the holder's two consoles
// opened at almost the same moment on two replicas, the one whose write
// lands last is the newest (its stamp newer than the other's, and the
// claim names it), also when the other write lands between its read and
// its compare-and-swap; the replicas' clocks play no part (each service
// here has its own, minutes apart). The counter goes on from an older
// portal's record.
func TestTakeConsole_NewestInEveryOrder(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		before  string // the claim's record before both
		between bool   // the first write lands between the last's read and its write
	}{
		{"OneAfterTheOther", "", false},
		{"OneWhileTheOtherWrites", "", true},
		{"AfterAnOlderPortalsSessionID", "a3f9c0de51b2", false},
		{"AfterAnOlderPortalsTimeStamp", fmt.Sprintf("%020d.s0", at.Add(time.Hour).UnixNano()), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			leases := &racingLeases{Leases: db.Leases()}
			replica := func(skew time.Duration) *vdi.Service {
				return vdi.NewService(vdi.Config{Backend: leasetest.NewPool("local", "team", 1, 1), Leases: leases, Audit: db,
					Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return at.Add(skew) }})
			}
			ahead, behind := replica(3*time.Minute), replica(-3*time.Minute)
			d, err := ahead.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "team")
			if err != nil {
				t.Fatal(err)
			}
			ref := d.Ref()
			if tc.before != "" {
				if _, err := ahead.TakeConsole(ctx, ref, vdi.ProtocolVNC, "s0"); err != nil {
					t.Fatal(err)
				}
				l, err := db.Leases().Get(ctx, ref)
				if err != nil {
					t.Fatal(err)
				}
				l.Annotations["corral.dev/vdi-newest-vnc"] = tc.before
				if _, err := db.Leases().Update(ctx, l); err != nil {
					t.Fatal(err)
				}
			}
			var first string
			take := func() { // the replica whose clock is ahead writes first
				if first, err = ahead.TakeConsole(ctx, ref, vdi.ProtocolVNC, "a"); err != nil {
					t.Error(err)
				}
			}
			if tc.between {
				leases.between = take
			} else {
				take()
			}
			last, err := behind.TakeConsole(ctx, ref, vdi.ProtocolVNC, "b")
			if err != nil {
				t.Fatal(err)
			}
			if !vdi.NewerConsole(last, first) || vdi.NewerConsole(first, last) || !vdi.NewerConsole(first, tc.before) {
				t.Errorf("stamps: before %q, first %q, last %q; want each newer than the one before", tc.before, first, last)
			}
			if got, err := behind.NewestConsole(ctx, ref, vdi.ProtocolVNC); err != nil || got != last {
				t.Errorf("the claim's newest console: %q, %v; want the last written, %q", got, err, last)
			}
		})
	}
}
