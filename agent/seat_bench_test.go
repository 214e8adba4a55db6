package agent

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// benchSeat starts a real desktop (Xvnc and its xterm, 1280x800) and
// returns the agent's seat on it, joined through a screen hub as the
// portal joins it, once the xterm echoes keys and the screen has settled.
func benchSeat(b *testing.B) *seat {
	b.Helper()
	if err := local.CheckDesktopDeps(); err != nil {
		b.Skip(err)
	}
	dir, err := os.MkdirTemp("", "cagent") // short: the VNC socket lives under it
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	d, err := local.StartDesktop(context.Background(), local.DesktopSpec{Name: "agent", Dir: filepath.Join(dir, "run"), Home: filepath.Join(dir, "home"), Geometry: "1280x800"}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Stop() })
	var hubs rfb.Hubs
	dial := func(ctx context.Context) (net.Conn, string, error) {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, "unix", d.VNCSocket())
		return c, "direct", err
	}
	ss := &seats{idle: DefaultSeatIdle, join: func(ctx context.Context, _ vdi.Identity, _ vdi.Ref) (net.Conn, error) {
		c, _, err := hubs.Join(ctx, "bench", true, dial)
		return c, err
	}}
	st, err := ss.get(context.Background(), vdi.Ref{Namespace: "local", Name: "agent"}, vdi.Identity{Login: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ss.close(vdi.Ref{Namespace: "local", Name: "agent"}) })
	// Until the xterm is up, keys change nothing: type x until one shows.
	for ready := false; !ready; {
		ready = keyChanges(b, st, 'x', time.Second) > 0
	}
	settle(b, st)
	return st
}

// keyChanges presses and lets go of sym and returns how long the screen
// took to change, 0 when it did not within wait.
func keyChanges(b *testing.B, st *seat, sym uint32, wait time.Duration) time.Duration {
	since := st.v.Gen()
	start := time.Now()
	if err := tap(context.Background(), st, []uint32{sym}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := st.v.WaitChange(ctx, since); err != nil {
		return 0
	}
	return time.Since(start)
}

// settle waits for a quiet screen: an echo can come as more than one
// update, and the next change must not be the last one's.
func settle(b *testing.B, st *seat) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err := st.v.WaitChange(ctx, st.v.Gen())
		cancel()
		if err != nil {
			return
		}
	}
}

// change makes the screen change (x, then BackSpace, in turn, so that the
// line never empties) and waits for it to settle.
func change(b *testing.B, st *seat, i int) {
	sym := uint32('x')
	if i%2 == 1 {
		sym = 0xff08 // BackSpace
	}
	if keyChanges(b, st, sym, 10*time.Second) == 0 {
		b.Fatalf("key %#x: no change on the screen", sym)
	}
	settle(b, st)
}

// BenchmarkSeat_Screenshot: the screenshot tool's work (the seat's cached
// PNG) on a real 1280x800 desktop, full size and scaled to 1024 wide, of
// an unchanged screen (the cache: no encode) and of a changed one (one
// copy, scale and PNG encode). ns/op is the screenshot alone (the change
// before it is off the clock); reported too: its median, the PNG's bytes
// and the process's CPU per screenshot.
func BenchmarkSeat_Screenshot(b *testing.B) {
	st := benchSeat(b)
	for _, tc := range []struct {
		name    string
		width   int
		changed bool
	}{
		{"unchanged/full", 0, false},
		{"unchanged/1024", 1024, false},
		{"changed/full", 0, true},
		{"changed/1024", 1024, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			sh := shot{width: tc.width}
			if _, _, err := st.screenshot(sh); err != nil { // the cache's first fill
				b.Fatal(err)
			}
			var took []time.Duration
			var bytes int
			var cpu time.Duration
			b.ResetTimer()
			for i := range b.N {
				if tc.changed {
					b.StopTimer()
					change(b, st, i)
					b.StartTimer()
				}
				cpu0, start := cpuTime(), time.Now()
				png, _, err := st.screenshot(sh)
				took = append(took, time.Since(start))
				cpu += cpuTime() - cpu0
				if err != nil {
					b.Fatal(err)
				}
				bytes += len(png)
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2])/1e6, "median-ms")
			b.ReportMetric(float64(bytes)/float64(b.N)/1024, "KiB/shot")
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/shot")
		})
	}
}

// BenchmarkSeat_InputToChange: the agent's input to the changed screen it
// waits for (type_text then wait_for_change): a key into the desktop's
// xterm through the screen hub until the seat's picture changes. ns/op
// includes settling after each change; median-ms and p95-ms are the round
// trip alone.
func BenchmarkSeat_InputToChange(b *testing.B) {
	st := benchSeat(b)
	var took []time.Duration
	b.ResetTimer()
	for i := range b.N {
		sym := uint32('x')
		if i%2 == 1 {
			sym = 0xff08
		}
		d := keyChanges(b, st, sym, 10*time.Second)
		if d == 0 {
			b.Fatalf("key %#x: no change on the screen", sym)
		}
		took = append(took, d)
		settle(b, st)
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, "median-ms")
	b.ReportMetric(float64(took[len(took)*95/100])/1e6, "p95-ms")
}

// BenchmarkSeat_CPUAt2PerSecond: one agent taking 2 screenshots a second
// (full size) for b.N half-seconds, of a screen that changes before each
// (a key: the worst case, one encode per shot) and of a still one (the
// cache). Reported: the process's CPU (the hub, the seat's picture, the
// encode) as a share of one core.
func BenchmarkSeat_CPUAt2PerSecond(b *testing.B) {
	st := benchSeat(b)
	for _, changing := range []bool{true, false} {
		name := "still"
		if changing {
			name = "changing"
		}
		b.Run(name, func(b *testing.B) {
			tick := time.NewTicker(500 * time.Millisecond)
			defer tick.Stop()
			cpu0, start := cpuTime(), time.Now()
			for i := range b.N {
				<-tick.C
				if changing {
					if err := tap(context.Background(), st, []uint32{map[bool]uint32{true: 'x', false: 0xff08}[i%2 == 0]}); err != nil {
						b.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
					st.v.WaitChange(ctx, st.v.Gen())
					cancel()
				}
				if _, _, err := st.screenshot(shot{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(100*float64(cpuTime()-cpu0)/float64(time.Since(start)), "cpu-%-of-a-core")
		})
	}
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
