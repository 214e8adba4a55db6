package console_test

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// stormClients is how many clients a storm joins to one desktop.
const stormClients = 50

// stormResult is what a join/leave storm saw.
type stormResult struct {
	failed int32 // clients that got no screen
	peak   int32 // the most upstream connections open at once
	dials  int32 // upstream connections opened, one after another
}

// storm starts a real desktop and three replicas, and has stormClients
// clients join and leave its screen at random across them, owners coming
// and going with them; rounds storms run one after another on the same
// replicas.
func storm(tb testing.TB, rounds int, each func(stormResult)) {
	dial, dials := startDesktop(tb)
	var open, peak atomic.Int32
	counted := func(ctx context.Context) (net.Conn, string, error) {
		c, path, err := dial(ctx)
		if err != nil {
			return nil, "", err
		}
		n := open.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		return &countedConn{Conn: c, open: &open}, path, nil
	}
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	var reps []*replica
	for _, n := range []string{"a", "b", "c"} {
		reps = append(reps, startReplica(tb, table, n, counted))
	}
	ref := vdi.Ref{Namespace: "ns", Name: "storm"}
	for range rounds {
		peak.Store(0)
		dials.Store(0)
		var wg sync.WaitGroup
		var failed atomic.Int32
		for i := range stormClients {
			wg.Go(func() {
				time.Sleep(time.Duration(i%17) * 60 * time.Millisecond)
				conn, _, err := reps[i%3].screens.Join(context.Background(), ref, i%5 == 0, counted)
				if err != nil {
					tb.Logf("client %d on %c: %v", i, 'a'+i%3, err)
					failed.Add(1)
					return
				}
				defer conn.Close()
				if _, err := snapshot.Take(conn, 0, time.Now().Add(30*time.Second)); err != nil {
					tb.Logf("client %d's screen: %v", i, err)
					failed.Add(1)
				}
			})
		}
		wg.Wait()
		each(stormResult{failed: failed.Load(), peak: peak.Load(), dials: dials.Load()})
	}
}

// TestScreens_JoinLeaveStorm: fifty clients join and leave one desktop's
// screen at random across three replicas, owners coming and going with
// them: every client gets the screen, and the desktop never has two
// upstream connections at once.
func TestScreens_JoinLeaveStorm(t *testing.T) {
	storm(t, 1, func(r stormResult) {
		if r.failed > 0 {
			t.Errorf("%d of %d clients got no screen; want all", r.failed, stormClients)
		}
		if r.peak != 1 {
			t.Errorf("at most %d upstream connections at once; want 1", r.peak)
		}
		t.Logf("%d upstream connections one after another for %d clients", r.dials, stormClients)
	})
}

// BenchmarkScreens_JoinLeaveStorm: upstream connections of one desktop
// while fifty clients join and leave it at random across three replicas,
// one storm an op. Reported: the most open at once in any storm (the goal
// is never above 1), how many were opened one after another a storm, and
// the clients that got no screen.
func BenchmarkScreens_JoinLeaveStorm(b *testing.B) {
	var peak, dials, failed int32
	storm(b, b.N, func(r stormResult) {
		peak = max(peak, r.peak)
		dials += r.dials
		failed += r.failed
	})
	b.ReportMetric(float64(peak), "peak-upstreams")
	b.ReportMetric(float64(dials)/float64(b.N), "upstreams/storm")
	b.ReportMetric(float64(failed)/float64(b.N), "failed-clients/storm")
}

// countedConn counts itself out of open when it closes.
type countedConn struct {
	net.Conn
	open *atomic.Int32
	once sync.Once
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.open.Add(-1) })
	return err
}
