package rfb

import (
	"context"
	"net"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkHub_KeyToPixels: the holder's keypress into a real desktop's
// xterm to the changed pixels on the holder's screen, with 0, 1 and 10
// viewers on the same hub, one viewer whose link does 1 Mbit/s, and, as
// the limit, the holder alone on a direct connection (no hub). Each viewer
// reads every update it can. Reported: the median and p95 of keypress to
// the first changed pixels, the hub's heap KiB per viewer, and the process's CPU per
// keypress (hub and test clients, Xvnc excluded; it includes the quiet
// wait after each echo, so compare it across rows only).
func BenchmarkHub_KeyToPixels(b *testing.B) {
	for _, tc := range []struct {
		name      string
		viewers   int
		throttled bool
		direct    bool
	}{
		{"direct", 0, false, true},
		{"viewers=0", 0, false, false},
		{"viewers=1", 1, false, false},
		{"viewers=10", 10, false, false},
		{"viewers=1-at-1Mbit", 1, true, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			dial, _, sock := startXvnc(b, "1024x768")
			var hubs Hubs
			join := func(control bool) net.Conn {
				if tc.direct {
					c, err := net.Dial("unix", sock)
					must(b, err)
					return c
				}
				c, _, err := hubs.Join(context.Background(), "bench", control, dial)
				must(b, err)
				return c
			}
			holderConn := join(true)
			defer holderConn.Close()
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			for range tc.viewers {
				conn := join(false)
				if tc.throttled {
					conn = &slowConn{Conn: conn, bytesPerSec: 1e6 / 8}
				}
				v := dialTestClient(b, conn, encZRLE, encExtendedDesktopSize)
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer conn.Close()
					v.request(false)
					for ctx.Err() == nil {
						conn.SetReadDeadline(time.Now().Add(time.Minute))
						if v.next() != nil {
							return
						}
						v.request(true)
					}
				}()
			}
			holder := dialTestClient(b, holderConn, encZRLE, encExtendedDesktopSize)
			updates := make(chan error, 100)
			go func() {
				for {
					err := holder.next()
					updates <- err
					if err != nil {
						return
					}
				}
			}()
			holder.request(false)
			must(b, <-updates)
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			press := func(sym uint32) {
				for _, down := range []byte{1, 0} {
					holderConn.Write([]byte{msgKeyEvent, down, 0, 0, byte(sym >> 24), byte(sym >> 16), byte(sym >> 8), byte(sym)})
				}
				holder.request(true)
			}
			// Until the xterm is up, keys change nothing: type x until one
			// shows, then wait for the screen to settle.
			for ready := false; !ready; {
				press('x')
				select {
				case err := <-updates:
					must(b, err)
					ready = true
				case <-time.After(time.Second):
				}
			}
			// settle waits for a quiet screen: an echo can come as more than
			// one update, and the next key must not take the last one's.
			settle := func(quiet time.Duration) {
				for {
					holder.request(true)
					select {
					case err := <-updates:
						must(b, err)
					case <-time.After(quiet):
						return
					}
				}
			}
			settle(time.Second)
			// One keypress and its echo: x, then BackSpace, so that the line
			// never empties (a BackSpace on an empty line changes nothing).
			var took []time.Duration
			key := func(sym uint32) {
				start := time.Now()
				press(sym)
				select {
				case err := <-updates:
					must(b, err)
				case <-time.After(10 * time.Second):
					b.Fatalf("key %#x: no change on the screen", sym)
				}
				took = append(took, time.Since(start))
				b.StopTimer()
				settle(50 * time.Millisecond)
				b.StartTimer()
			}
			key('x') // warm up
			key(0xff08)
			took = took[:0]
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				if i%2 == 0 {
					key('x')
				} else {
					key(0xff08) // BackSpace
				}
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds()), "median-us")
			b.ReportMetric(float64(took[len(took)*95/100].Microseconds()), "p95-us")
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-us/op")
			if tc.viewers > 0 {
				// Each test viewer keeps a framebuffer of its own, as a
				// browser does; that is not the portal's and is left out.
				own := int64(holder.fb.w * holder.fb.h * 4)
				b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse)-own*int64(tc.viewers))/1024/float64(tc.viewers), "heap-KiB/viewer")
			}
			cancel()
			holderConn.Close()
			hubs.closeAll()
			wg.Wait()
		})
	}
}

// closeAll ends every hub, for the benchmark's clean-up.
func (hs *Hubs) closeAll() {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	for _, e := range hs.by {
		if e.hub != nil {
			e.hub.Close()
		}
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// slowConn reads at most bytesPerSec, as a viewer on a slow link does.
type slowConn struct {
	net.Conn
	bytesPerSec int
}

func (c *slowConn) Read(p []byte) (int, error) {
	p = p[:min(len(p), max(c.bytesPerSec/50, 1))] // 20 ms worth at a time
	n, err := c.Conn.Read(p)
	time.Sleep(time.Duration(n) * time.Second / time.Duration(c.bytesPerSec))
	return n, err
}

// BenchmarkHub_TileRequests: a viewer on a real desktop's hub asking for
// a 64x64 tile at a time (as the soak's VNC sessions do), Raw. Reported
// with -benchmem: what each tile allocates, the hub and the test client
// together (the client's share is the same in every build).
func BenchmarkHub_TileRequests(b *testing.B) {
	// The soak asks 5 tiles a second, well within a viewer's repaint
	// budget; asked as fast as they go, they would measure the budget.
	defer fullEvery.Store(fullEvery.Load())
	fullEvery.Store(int64(time.Microsecond))
	dial, _, _ := startXvnc(b, "1024x768")
	var hubs Hubs
	defer hubs.closeAll()
	conn, _, err := hubs.Join(context.Background(), "bench", false, dial)
	must(b, err)
	defer conn.Close()
	v := dialTestClient(b, conn)
	v.request(false)
	must(b, v.next())
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		x, y := i%16*64, i/16%12*64
		_, err := conn.Write([]byte{msgUpdateRequest, 0, byte(x >> 8), byte(x), byte(y >> 8), byte(y), 0, 64, 0, 64})
		must(b, err)
		must(b, v.next())
	}
}
