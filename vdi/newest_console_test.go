package vdi_test

import (
	"context"
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

// TestTakeConsole_NewestInEveryOrder: of the holder's two consoles opened
// at almost the same moment (the stamps 1 µs apart), the claim records
// the newer whichever write lands last, and when the other write lands
// between a write's read and its compare-and-swap.
func TestTakeConsole_NewestInEveryOrder(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	older, newer := "00000000000000000001.b", "00000000000000000002.a" // as console.Stamp orders them
	for _, tc := range []struct {
		name        string
		last, other string // last's write lands last; other's before it, or between its read and its write
		between     bool
	}{
		{"OlderLandsLast", older, newer, false},
		{"NewerLandsLast", newer, older, false},
		{"NewerLandsWhileOlderWrites", older, newer, true},
		{"OlderLandsWhileNewerWrites", newer, older, true},
		{"AnOlderPortalsRecord", newer, "a3f9c0de51b2", false}, // a session id, before stamps
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := store.Open(ctx, filepath.Join(t.TempDir(), "portal.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			leases := &racingLeases{Leases: db.Leases()}
			svc := vdi.NewService(vdi.Config{Backend: leasetest.NewPool("local", "team", 1, 1), Leases: leases, Audit: db,
				Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return at }})
			d, err := svc.Claim(ctx, vdi.Identity{Login: "alice"}, "local", "team")
			if err != nil {
				t.Fatal(err)
			}
			ref := d.Ref()
			if tc.between {
				leases.between = func() { // the other replica's write, landing first
					if err := svc.TakeConsole(ctx, ref, vdi.ProtocolVNC, tc.other); err != nil {
						t.Error(err)
					}
				}
			} else if err := svc.TakeConsole(ctx, ref, vdi.ProtocolVNC, tc.other); err != nil {
				t.Fatal(err)
			}
			if err := svc.TakeConsole(ctx, ref, vdi.ProtocolVNC, tc.last); err != nil {
				t.Fatal(err)
			}
			if got, err := svc.NewestConsole(ctx, ref, vdi.ProtocolVNC); err != nil || got != newer {
				t.Errorf("the claim's newest console: %q, %v; want the newer one, %q", got, err, newer)
			}
		})
	}
}
